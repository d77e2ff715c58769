#!/bin/sh
# Build RunDuCode against the authors' sources (wevent issue 25; see README.md here).
# DWC and JT: git repositories (a clone or a bare mirror) of dulei715/DynamicWEventCode and
# dulei715/java-tools; MATH3 and DOM4J: commons-math3 3.6.1 (run time) and any dom4j jar with
# org.dom4j.Document (compile time only: the XML configuration is never loaded).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/ducode_java}
DWC=${DWC:-/work/.mirror/dulei715+DynamicWEventCode/repo}
JT=${JT:-/work/.mirror/dulei715+java-tools/repo}
MATH3=${MATH3:-$HOME/.m2/repository/org/apache/commons/commons-math3/3.6.1/commons-math3-3.6.1.jar}
DOM4J=${DOM4J:-$HOME/.m2/repository/dom4j/dom4j/1.1/dom4j-1.1.jar}
rm -rf "$OUT" && mkdir -p "$OUT/dwc" "$OUT/jt" "$OUT/classes" "$OUT/shadow" "$OUT/shadow_dpbx"
git -C "$DWC" archive 286adeaf92e850ef79f300d2463373c8fa4ec65c src/main/java | tar -x -C "$OUT/dwc"
git -C "$JT" archive ccd2d30 src/main/java | tar -x -C "$OUT/jt"
javac -nowarn -encoding UTF-8 -d "$OUT/classes" -cp "$MATH3:$DOM4J" \
    -sourcepath "$OUT/dwc/src/main/java:$OUT/jt/src/main/java" "$HERE/RunDuCode.java"
javac -nowarn -encoding UTF-8 -d "$OUT/shadow" -cp "$OUT/classes" \
    "$HERE/shadow/ecnu/dll/schemes/_scheme_utils/BooleanStreamDataElementUtils.java"
javac -nowarn -encoding UTF-8 -d "$OUT/shadow_dpbx" \
    "$HERE/shadow/ecnu/dll/struts/direct_stream/BackwardHistoricalStream.java"
echo "built: java -cp $OUT/classes:$MATH3 RunDuCode ...  (fast: -Dfastcount=true -cp $OUT/shadow:$OUT/classes:$MATH3; dpbx: -cp $OUT/shadow_dpbx:$OUT/classes:$MATH3)"
