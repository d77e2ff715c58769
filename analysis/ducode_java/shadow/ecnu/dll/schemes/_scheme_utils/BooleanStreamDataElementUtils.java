package ecnu.dll.schemes._scheme_utils;

import ecnu.dll.struts.stream_data.StreamDataElement;

import java.util.AbstractList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

// Count-equivalent stand-in (wevent, 001 Tables 5-6; speed only): a CountList of c0 users at "0" and
// c1 at "1" is counted in O(1); any other list is counted element by element.
public class BooleanStreamDataElementUtils {
    public static class CountList extends AbstractList<StreamDataElement<Boolean>> {
        public final int c0, c1;
        private final StreamDataElement<Boolean> e0, e1;
        public CountList(int c0, int c1, StreamDataElement<Boolean> e0, StreamDataElement<Boolean> e1) {
            this.c0 = c0; this.c1 = c1; this.e0 = e0; this.e1 = e1;
        }
        public StreamDataElement<Boolean> get(int i) { return i < c0 ? e0 : e1; }
        public int size() { return c0 + c1; }
    }

    public static TreeMap<String, Integer> getCountByGivenElementType(Boolean elementValue, List<StreamDataElement<Boolean>> dataList) {
        TreeMap<String, Integer> result = new TreeMap<>();
        if (dataList instanceof CountList) {
            CountList cl = (CountList) dataList;
            result.put("0", elementValue ? cl.c0 : cl.c1);
            result.put("1", elementValue ? cl.c1 : cl.c0);
            return result;
        }
        for (String k : dataList.get(0).getKeyList()) result.put(k, 0);
        for (StreamDataElement<Boolean> el : dataList) {
            for (Map.Entry<String, Boolean> en : el.getDataMap().entrySet()) {
                if (elementValue.equals(en.getValue())) result.put(en.getKey(), result.get(en.getKey()) + 1);
            }
        }
        return result;
    }
}
