// Driver for wevent (001 Tables 5-6 on TLNS): runs the authors' own classes
// (github.com/dulei715/DynamicWEventCode @286adeaf, its dependency dulei715/java-tools @ccd2d30,
// the last java-tools commit before DynamicWEventCode's) without their XML configuration.
// No code of the authors is copied here; build.sh compiles their sources next to this file.
//
//   gen DIR T N P0 SEED    their TLNSFunction (p_0 = P0, steps N(0, 0.0025^2) rounded to 0.01),
//                          its Random replaced by new Random(SEED) (001 Section 6.1: seed 1),
//                          then their SyntheticGenerationUtils writes DIR/runInput (one file a slot)
//   genfn DIR T N sin|log  the same with their SinFunction / LogFunction at 001's parameters
//   walk T P0 SEED OUT     gen's walk only (the lines of basic_info/probability.txt), no user files
//   run DIR ORDER SEG BATCH CONFIGS [MAXSLOTS [SEGCSV]]
//                          their FixedSegmentBasicParameterRun loop for NP, BD and BA: the files
//                          of DIR/runInput as File.listFiles returns them (ORDER fs, as their
//                          DatasetSegmentRunUtils does), sorted by name (sorted) or shuffled
//                          (shuffleK); a fresh mechanism every SEG slots, batches of BATCH; AMRE =
//                          sum of their BRE / slots (their PostProcessUtils). CONFIGS: E:w,...
//   counts DIR OUT         each runInput file's counts, in File.listFiles order
//   pubs COUNTS ORDER SEG CONFIGS REPEATS   BD's publications and their noise scales
//   fast COUNTS ORDER SEG BATCH CONFIGS REPEATS
//                          the run loop on those counts, REPEATS times; with -Dfastcount=true and
//                          shadow/ first on the class path the counting is O(1) per slot (same
//                          counts as their BooleanStreamDataElementUtils; only speed differs);
//                          with -Dfast.bdonly=true BA is not run (chance.py's runs)
//   params DIR T USERS TYPES   the inputs their runner gives DPBD and DPBA (their GenerateGroupParametersForTLNS
//                          with parameter_config.xml's values passed as arguments): DIR/basic_info/{user,
//                          userTypeID,user_to_type}.txt and DIR/group_generated_parameters/1.privacy_budget/
//                          budget_E/ and 2.window_size/w_size_W/ (a type file and one file a slot)
//   dpbx COUNTS ORDER SEG BATCH CONFIGS REPEATS PARAMS [SEED]
//                          their DPBD and DPBA (DynamicPersonalizedBudgetDistribution / ...Absorption) in the
//                          loop of their FixedSegmentBasicParameterTotalMechanismRun, on the slots of COUNTS
//                          (ones placed on a random set of users, see slotShuffled) with the parameters of
//                          PARAMS; needs shadow/ first on the class path (BackwardHistoricalStream)
import cn.edu.dll.result.ExperimentResult;
import cn.edu.dll.struct.pair.PurePair;
import ecnu.dll.run._pre_process.a_dataset_pre_process.dataset_pre_handler.synthetic_dataset.function.TLNSFunction;
import ecnu.dll.run._pre_process.a_dataset_pre_process.dataset_pre_handler.synthetic_dataset.utils.SyntheticGenerationUtils;
import ecnu.dll.run.a_mechanism_run._0_NonPrivacyMechanismRun;
import ecnu.dll.run.a_mechanism_run._1_WEventMechanismRun;
import ecnu.dll.run.c_dataset_run.utils.DatasetParameterUtils;
import ecnu.dll.schemes.basic_scheme.NonPrivacyMechanism;
import ecnu.dll.schemes.compared_scheme.w_event.BudgetAbsorption;
import ecnu.dll.schemes.compared_scheme.w_event.BudgetDistribution;
import ecnu.dll.schemes.compared_scheme.w_event.WEventMechanism;
import ecnu.dll.struts.stream_data.StreamCountData;
import ecnu.dll.struts.stream_data.StreamDataElement;
import ecnu.dll.utils.filters.NumberTxtFilter;

import java.io.File;
import java.io.PrintWriter;
import java.lang.reflect.Field;
import java.util.*;

public class RunDuCode {
    static Object getField(Object o, Class<?> c, String name) throws Exception {
        Field f = c.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(o);
    }
    static void setField(Object o, Class<?> c, String name, Object v) throws Exception {
        Field f = c.getDeclaredField(name);
        f.setAccessible(true);
        f.set(o, v);
    }

    // gen DIR T N P0 SEED
    static void gen(String dir, int T, int N, double p0, long seed) throws Exception {
        new File(dir, "basic_info").mkdirs();
        new File(dir, "runInput").mkdirs();
        TLNSFunction fn = new TLNSFunction(p0, 0D, 0.0025);
        Object gauss = getField(fn, TLNSFunction.class, "gaussUtils");
        setField(gauss, gauss.getClass(), "random", new Random(seed));  // 001: Java Random, seed 1
        List<Double> probs = fn.nextProbability(T);
        // the format of SyntheticGenerationUtils.generateProbability(.., containInitialValue=true)
        try (PrintWriter pw = new PrintWriter(new File(dir, "basic_info/probability.txt"))) {
            pw.println("0," + String.valueOf(fn.getInitializedValue()));
            for (int i = 0; i < T - 1; i++) pw.println((i + 1) + "," + String.valueOf(probs.get(i)));
        }
        SyntheticGenerationUtils.generateTimeStamp(dir, T);
        SyntheticGenerationUtils.generateUserID(dir, N);
        SyntheticGenerationUtils.generatePositionType(dir, "status.txt", 2);
        SyntheticGenerationUtils.generateRunInputData(dir, "status.txt");
    }

    // walk T P0 SEED OUT : the probabilities gen writes, without the 1.2 GB of user files
    static void walk(int T, double p0, long seed, String out) throws Exception {
        TLNSFunction fn = new TLNSFunction(p0, 0D, 0.0025);
        Object gauss = getField(fn, TLNSFunction.class, "gaussUtils");
        setField(gauss, gauss.getClass(), "random", new Random(seed));
        List<Double> probs = fn.nextProbability(T);
        try (PrintWriter pw = new PrintWriter(out)) {
            pw.println("0," + String.valueOf(fn.getInitializedValue()));
            for (int i = 0; i < T - 1; i++) pw.println((i + 1) + "," + String.valueOf(probs.get(i)));
        }
    }

    // genfn DIR T N sin|log : 001's Sin (A=0.05, omega=0.01, h=0.075) or Log (A=0.25, b=0.01)
    static void genFn(String dir, int T, int N, String kind) throws Exception {
        new File(dir, "basic_info").mkdirs();
        new File(dir, "runInput").mkdirs();
        ecnu.dll.run._pre_process.a_dataset_pre_process.dataset_pre_handler.synthetic_dataset.function.DataGenerationFunction<Double> fn =
            kind.equals("sin") ? new ecnu.dll.run._pre_process.a_dataset_pre_process.dataset_pre_handler.synthetic_dataset.function.SinFunction(0.05, 0.01, 0.075)
                               : new ecnu.dll.run._pre_process.a_dataset_pre_process.dataset_pre_handler.synthetic_dataset.function.LogFunction(0.25, 0.01);
        List<Double> probs = fn.nextProbability(T);
        try (PrintWriter pw = new PrintWriter(new File(dir, "basic_info/probability.txt"))) {
            pw.println("0," + String.valueOf(fn.getInitializedValue()));
            for (int i = 0; i < T - 1; i++) pw.println((i + 1) + "," + String.valueOf(probs.get(i)));
        }
        SyntheticGenerationUtils.generateTimeStamp(dir, T);
        SyntheticGenerationUtils.generateUserID(dir, N);
        SyntheticGenerationUtils.generatePositionType(dir, "status.txt", 2);
        SyntheticGenerationUtils.generateRunInputData(dir, "status.txt");
    }

    // counts DIR OUT : the runInput files in File.listFiles order with their counts (their getData / NP)
    static void counts(String dir, String out) throws Exception {
        List<String> dataType = DatasetParameterUtils.getDataType(dir, "status.txt");
        File[] files = new File(dir, "runInput").listFiles(new NumberTxtFilter());
        NonPrivacyMechanism np = new NonPrivacyMechanism(dataType);
        try (PrintWriter pw = new PrintWriter(out)) {
            for (File f : files) {
                List<List<StreamDataElement<Boolean>>> one = new ArrayList<>();
                one.add(DatasetParameterUtils.getData(f.getAbsolutePath(), dataType));
                TreeMap<String, Integer> m = _0_NonPrivacyMechanismRun.runBatch(np, 0, one).getValue().get(0).getDataMap();
                pw.println(f.getName() + "," + m.get("0") + "," + m.get("1"));
            }
        }
    }

    // The counts file's rows (slot file, c0, c1) in ORDER: as written (the listing), sorted by
    // file name, or shuffled with a seed (shuffleK).
    static List<String[]> countRows(String countsFile, String order) throws Exception {
        List<String[]> rows = new ArrayList<>();
        for (String l : java.nio.file.Files.readAllLines(new File(countsFile).toPath())) rows.add(l.split(","));
        if (order.equals("sorted")) rows.sort(Comparator.comparing(r -> r[0]));
        else if (order.startsWith("shuffle")) Collections.shuffle(rows, new Random(Long.parseLong(order.substring(7))));
        return rows;
    }

    // fast DIR-less repeat: COUNTS ORDER(fs|sorted|shuffleK) SEG BATCH CONFIGS REPEATS
    // The authors' BD and BA objects and their runBatch are called unchanged; each slot's input list
    // holds c0 references to one element {0:true,1:false} and c1 to one {0:false,1:true}, which
    // gives their counting code the same counts as the file's 10,000 elements.
    static void fast(String countsFile, String order, int segUnit, int batch, String configs, int reps) throws Exception {
        List<String[]> rows = countRows(countsFile, order);
        List<String> dataType = Arrays.asList("0", "1");
        TreeMap<String, Boolean> m0 = new TreeMap<>(); m0.put("0", true); m0.put("1", false);
        TreeMap<String, Boolean> m1 = new TreeMap<>(); m1.put("0", false); m1.put("1", true);
        StreamDataElement<Boolean> e0 = new StreamDataElement(m0), e1 = new StreamDataElement(m1);
        int total = rows.size();
        String[] cs = configs.split(",");
        for (String c : cs) {
            String[] a = c.split(":"); double E = Double.parseDouble(a[0]); int w = Integer.parseInt(a[1]);
            StringBuilder sbd = new StringBuilder(), sba = new StringBuilder();
            for (int r = 0; r < reps; r++) {
                double bdSum = 0, baSum = 0;
                for (int s = 0; s < total; s += segUnit) {
                    int e = Math.min(s + segUnit - 1, total - 1);
                    NonPrivacyMechanism np = new NonPrivacyMechanism(dataType);
                    BudgetDistribution bdm = new BudgetDistribution(dataType, E, w);
                    BudgetAbsorption bam = new BudgetAbsorption(dataType, E, w);
                    List<List<StreamDataElement<Boolean>>> batchData = new ArrayList<>();
                    for (int i = s; i <= e; i++) {
                        int c0 = Integer.parseInt(rows.get(i)[1]), c1 = Integer.parseInt(rows.get(i)[2]);
                        batchData.add(FAST ? countList(c0, c1, e0, e1) : slotList(c0, c1, e0, e1));
                        if ((i + 1) % batch == 0 || i == total - 1) {
                            List<StreamCountData> raw = _0_NonPrivacyMechanismRun.runBatch(np, 0, batchData).getValue();
                            bdSum += bre(_1_WEventMechanismRun.runBatch(bdm, 0, batchData, raw));
                            if (!BD_ONLY) baSum += bre(_1_WEventMechanismRun.runBatch(bam, 0, batchData, raw));
                            batchData.clear();
                        }
                    }
                }
                sbd.append(String.format(" %.0f", bdSum / total));
                sba.append(String.format(" %.0f", baSum / total));
            }
            System.out.println("order=" + order + " E=" + E + " w=" + w + " BD" + sbd + (BD_ONLY ? "" : " | BA" + sba));
            System.out.flush();
        }
    }

    static final boolean FAST = Boolean.getBoolean("fastcount");
    // -Dfast.bdonly=true: fast mode steps NP and BD only (no "| BA" part in its lines). BD's
    // inputs and draws do not depend on BA: each batch runs BD before BA on the same lists, the
    // two share no state, and their Laplace noise comes from a new LaplaceDistribution per draw.
    static final boolean BD_ONLY = Boolean.getBoolean("fast.bdonly");
    @SuppressWarnings("unchecked")
    static List<StreamDataElement<Boolean>> countList(int c0, int c1, StreamDataElement<Boolean> e0, StreamDataElement<Boolean> e1) throws Exception {
        // the stand-in's CountList (shadow/), found at run time: their sources do not have it
        Class<?> c = Class.forName("ecnu.dll.schemes._scheme_utils.BooleanStreamDataElementUtils$CountList");
        return (List<StreamDataElement<Boolean>>) c.getConstructor(int.class, int.class, StreamDataElement.class, StreamDataElement.class).newInstance(c0, c1, e0, e1);
    }

    static List<StreamDataElement<Boolean>> slotList(int c0, int c1, StreamDataElement<Boolean> e0, StreamDataElement<Boolean> e1) {
        List<StreamDataElement<Boolean>> slot = new ArrayList<>(c0 + c1);
        for (int u = 0; u < c0; u++) slot.add(e0);
        for (int u = 0; u < c1; u++) slot.add(e1);
        return slot;
    }

    // pubs COUNTS ORDER SEG CONFIGS REPEATS: BD's publications (the release object changes) and
    // the budget and noise scale 1/budget of each, one slot at a time (batches do not change
    // the mechanism; they only group its error); needs -Dfastcount=true and shadow/
    static void pubs(String countsFile, String order, int segUnit, String configs, int reps) throws Exception {
        List<String[]> rows = countRows(countsFile, order);
        List<String> dataType = Arrays.asList("0", "1");
        TreeMap<String, Boolean> m0 = new TreeMap<>(); m0.put("0", true); m0.put("1", false);
        TreeMap<String, Boolean> m1 = new TreeMap<>(); m1.put("0", false); m1.put("1", true);
        StreamDataElement<Boolean> e0 = new StreamDataElement(m0), e1 = new StreamDataElement(m1);
        Field pubBudget = WEventMechanism.class.getDeclaredField("publicationPrivacyBudget");
        pubBudget.setAccessible(true);
        int total = rows.size();
        for (String c : configs.split(",")) {
            String[] a = c.split(":"); double E = Double.parseDouble(a[0]); int w = Integer.parseInt(a[1]);
            for (int r = 0; r < reps; r++) {
                long n = 0; List<Double> scales = new ArrayList<>();
                // the error split: the released values r = (true counts at the last publication,
                // zero after a restart) + noise; stale = that truth's distance from the slot's counts
                double err = 0, stale = 0, noise = 0;
                for (int s = 0; s < total; s += segUnit) {
                    int e = Math.min(s + segUnit - 1, total - 1);
                    BudgetDistribution bdm = new BudgetDistribution(dataType, E, w);
                    double p0 = 0, p1 = 0;
                    for (int i = s; i <= e; i++) {
                        int c0 = Integer.parseInt(rows.get(i)[1]), c1 = Integer.parseInt(rows.get(i)[2]);
                        Object before = bdm.getReleaseNoiseCountMap();
                        bdm.updateNextPublicationResult(countList(c0, c1, e0, e1));
                        if (bdm.getReleaseNoiseCountMap() != before) { n++; scales.add(1.0 / (Double) pubBudget.get(bdm)); p0 = c0; p1 = c1; }
                        TreeMap<String, Double> rel = bdm.getReleaseNoiseCountMap().getDataMap();
                        double r0 = rel.get("0"), r1 = rel.get("1");
                        err += ((r0 - c0) * (r0 - c0) + (r1 - c1) * (r1 - c1)) / 2;
                        stale += ((p0 - c0) * (p0 - c0) + (p1 - c1) * (p1 - c1)) / 2;
                        noise += ((r0 - p0) * (r0 - p0) + (r1 - p1) * (r1 - p1)) / 2;
                    }
                }
                Collections.sort(scales);
                System.out.printf("order=%s E=%s w=%d publications=%d of %d slots, noise scale 1/budget: median %.3g, 90th percentile %.3g, max %.3g; AMRE %.3g = stale %.3g + noise %.3g + cross%n",
                    order, E, w, n, total, scales.get(scales.size() / 2), scales.get((int) (scales.size() * 0.9)), scales.get(scales.size() - 1),
                    err / total, stale / total, noise / total);
            }
        }
    }


    // params DIR T USERS TYPES: what their GenerateGroupParametersForTLNS.main writes (UserGroupGenerator's
    // user types and user_to_type, then DiscreteParameterGenerator.generateParametersForDataset), with the
    // values their code reads from parameter_config.xml given here: UserType default 10, PrivacyBudget and
    // WindowSize "default" variances 0.2,...,1.0 and 40,...,200, GenPrivacyBudget / GenWindowSize
    // 0.2,...,1.0 / 40,...,200, BackwardPrivacyBudgetUpperBoundDifference 10 (used as lower and upper
    // bound, their generatePrivacyBudget), WindowSizeLowerBound 1.
    static final double[] BUDGETS = {0.2, 0.4, 0.6, 0.8, 1.0};
    static final int[] WINDOWS = {40, 80, 120, 160, 200};
    static void params(String dir, int T, int users, int types) throws Exception {
        new File(dir, "basic_info").mkdirs();
        SyntheticGenerationUtils.generateUserID(dir, users);
        String typePath = dir + "/basic_info/userTypeID.txt";
        ecnu.dll.utils.io.ListWriteUtils.writeList(typePath, ecnu.dll.run._pre_process.b_parameter_pre_process.version_3_group.parameter_generator.utils.UserGroupUtils.getUserIDType(types), ",");
        ecnu.dll.utils.io.ListWriteUtils.writeList(dir + "/basic_info/user_to_type.txt",
            ecnu.dll.run._pre_process.b_parameter_pre_process.version_3_group.parameter_generator.utils.UserGroupUtils.getUserToTypeInAverage(dir + "/basic_info/user.txt", typePath), ",");
        List<Integer> typeIDs = new ArrayList<>();
        for (int k = 0; k < types; k++) typeIDs.add(k);
        List<Integer> stamps = new ArrayList<>();
        for (int t = 0; t < T; t++) stamps.add(t);
        String base = dir + "/group_generated_parameters";
        for (int k = 0; k < BUDGETS.length; k++) {  // their generatePrivacyBudget: the candidates from E up, equal shares
            File d = new File(base + "/1.privacy_budget", ecnu.dll.run.b_parameter_run.basic.version_3.utils.ParameterGroupInitializeUtils.toPathName(BUDGETS[k]));
            d.mkdirs();
            List<Double> cand = new ArrayList<>(), ratio = new ArrayList<>();
            for (int j = k; j < BUDGETS.length; j++) { cand.add(BUDGETS[j]); ratio.add(1.0 / (BUDGETS.length - k)); }
            ecnu.dll.run._pre_process.b_parameter_pre_process.version_2_decrete.parameter_generator.DiscreteParameterGenerator.generateFixedPrivacyBudgetForAllUsers(d.getAbsolutePath(), "typePrivacyBudgetFile.txt", typeIDs, cand, ratio);
            ecnu.dll.run._pre_process.b_parameter_pre_process.version_2_decrete.parameter_generator.DiscreteParameterGenerator.generatePrivacyBudgetForAllUsersWithTimeStamps(d.getAbsolutePath(), "typePrivacyBudgetFile.txt", stamps, cand, 10.0, 10.0);
        }
        for (int k = 0; k < WINDOWS.length; k++) {  // their generateWindowSize: the candidates up to w, equal shares
            File d = new File(base + "/2.window_size", ecnu.dll.run.b_parameter_run.basic.version_3.utils.ParameterGroupInitializeUtils.toPathName(WINDOWS[k]));
            d.mkdirs();
            List<Integer> cand = new ArrayList<>(); List<Double> ratio = new ArrayList<>();
            for (int j = 0; j <= k; j++) { cand.add(WINDOWS[j]); ratio.add(1.0 / (k + 1)); }
            ecnu.dll.run._pre_process.b_parameter_pre_process.version_2_decrete.parameter_generator.DiscreteParameterGenerator.generateFixedWindowSizeForAllUsers(d.getAbsolutePath(), "typeWindowSizeFile.txt", typeIDs, cand, ratio);
            ecnu.dll.run._pre_process.b_parameter_pre_process.version_2_decrete.parameter_generator.DiscreteParameterGenerator.generateWindowSizeForAllUsersWithTimeStamps(d.getAbsolutePath(), "typeWindowSizeFile.txt", stamps, cand, 1);
        }
    }

    // One slot's users for DPBD / DPBA: c0 references to {0:true,1:false} and c1 to {0:false,1:true}
    // in a random order. Their generator (runInputGeneratorThread) draws every user's state
    // independently with the slot's probability, so given the slot's counts the set of users in
    // state 1 is uniformly random; DPBD and DPBA sample users by index with per-user budgets (their
    // PersonalizedDPTools.sampleIndex), so, unlike BD and BA, they see which users are in state 1.
    static List<StreamDataElement<Boolean>> slotShuffled(int c0, int c1, StreamDataElement<Boolean> e0, StreamDataElement<Boolean> e1, Random rnd) {
        List<StreamDataElement<Boolean>> slot = slotList(c0, c1, e0, e1);
        Collections.shuffle(slot, rnd);
        return slot;
    }

    // dpbx COUNTS ORDER SEG BATCH CONFIGS REPEATS PARAMS [SEED]: the loop of their
    // FixedSegmentBasicParameterTotalMechanismRun.runSegmentBatch for DPBD and DPBA (NP gives the
    // raw counts; BD, BA, PBD and PBA, which share no state with them, are left out). As there, each
    // segment of SEG slots gets new mechanisms; every slot's parameters are read from the files named
    // like the slot's file; the four parameter lists are appended to at every slot and never
    // cleared within the segment, while the data list is cleared at every batch, so each batch's
    // step t reads the parameters of the segment's slot t (t < BATCH).
    static void dpbx(String countsFile, String order, int segUnit, int batch, String configs, int reps, String paramDir, long seed) throws Exception {
        List<String[]> rows = countRows(countsFile, order);
        List<String> dataType = Arrays.asList("0", "1");
        TreeMap<String, Boolean> m0 = new TreeMap<>(); m0.put("0", true); m0.put("1", false);
        TreeMap<String, Boolean> m1 = new TreeMap<>(); m1.put("0", false); m1.put("1", true);
        StreamDataElement<Boolean> e0 = new StreamDataElement(m0), e1 = new StreamDataElement(m1);
        String userToType = paramDir + "/basic_info/user_to_type.txt";
        Integer userSize = ecnu.dll.run.b_parameter_run.basic.version_3.utils.ParameterGroupInitializeUtils.getUserSize(paramDir + "/basic_info/user.txt");
        Random rnd = new Random(seed);
        int total = rows.size();
        for (String c : configs.split(",")) {
            String[] a = c.split(":"); double E = Double.parseDouble(a[0]); int w = Integer.parseInt(a[1]);
            String budgetDir = paramDir + "/group_generated_parameters/1.privacy_budget/" + ecnu.dll.run.b_parameter_run.basic.version_3.utils.ParameterGroupInitializeUtils.toPathName(E);
            String windowDir = paramDir + "/group_generated_parameters/2.window_size/" + ecnu.dll.run.b_parameter_run.basic.version_3.utils.ParameterGroupInitializeUtils.toPathName(w);
            for (int r = 0; r < reps; r++) {
                for (int s = 0, segID = 0; s < total; s += segUnit, segID++) {
                    if (SEGMENTS != null && !SEGMENTS.contains(segID)) continue;
                    long t0 = System.currentTimeMillis();
                    double dSum = 0, aSum = 0;
                    int e = Math.min(s + segUnit - 1, total - 1);
                    NonPrivacyMechanism np = new NonPrivacyMechanism(dataType);
                    ecnu.dll.schemes.main_scheme.b_dynamic_windown_size.DynamicPersonalizedBudgetDistribution dpbd =
                        new ecnu.dll.schemes.main_scheme.b_dynamic_windown_size.DynamicPersonalizedBudgetDistribution(dataType, userSize);
                    ecnu.dll.schemes.main_scheme.b_dynamic_windown_size.DynamicPersonalizedBudgetAbsorption dpba =
                        new ecnu.dll.schemes.main_scheme.b_dynamic_windown_size.DynamicPersonalizedBudgetAbsorption(dataType, userSize);
                    List<List<StreamDataElement<Boolean>>> batchData = new ArrayList<>();
                    List<List<Double>> remainBack = new ArrayList<>(), fwdBudget = new ArrayList<>();
                    List<List<Integer>> backWin = new ArrayList<>(), fwdWin = new ArrayList<>();
                    int batchID = 0;
                    for (int i = s; i <= e; i++) {
                        int c0 = Integer.parseInt(rows.get(i)[1]), c1 = Integer.parseInt(rows.get(i)[2]);
                        batchData.add(slotShuffled(c0, c1, e0, e1, rnd));
                        String name = rows.get(i)[0];
                        List[] pb = ecnu.dll.run.b_parameter_run.basic.version_3.utils.ParameterGroupInitializeUtils.getBackForwardPrivacyBudgetFromFile(budgetDir + "/" + name, userToType);
                        remainBack.add(pb[0]); fwdBudget.add(pb[1]);
                        List[] pw = ecnu.dll.run.b_parameter_run.basic.version_3.utils.ParameterGroupInitializeUtils.getBackForwardWindowSizeFromFile(windowDir + "/" + name, userToType);
                        backWin.add(pw[0]); fwdWin.add(pw[1]);
                        if ((i + 1) % batch == 0 || i == total - 1) {
                            List<StreamCountData> raw = _0_NonPrivacyMechanismRun.runBatch(np, batchID, batchData).getValue();
                            dSum += bre(ecnu.dll.run.a_mechanism_run._3_PersonalizedDynamicEventMechanismRun.runBatch(dpbd, batchID, batchData, raw, remainBack, backWin, fwdBudget, fwdWin));
                            aSum += bre(ecnu.dll.run.a_mechanism_run._3_PersonalizedDynamicEventMechanismRun.runBatch(dpba, batchID, batchData, raw, remainBack, backWin, fwdBudget, fwdWin));
                            batchID++;
                            batchData.clear();
                        }
                    }
                    // one line a segment: its AMRE (sum of BRE / its slots); a full run's AMRE is the
                    // mean over its segments weighted by their slots
                    System.out.printf("order=%s E=%s w=%d run=%d segment=%d slots=%d DPBD %.2f DPBA %.2f seconds %.0f%n",
                        order, E, w, r, segID, e - s + 1, dSum / (e - s + 1), aSum / (e - s + 1), (System.currentTimeMillis() - t0) / 1000.0);
                    System.out.flush();
                }
            }
        }
    }

    // -Ddpbx.segments=0,10,20,30: run only these segments (each starts new mechanisms, as in their runner)
    static final Set<Integer> SEGMENTS = System.getProperty("dpbx.segments") == null ? null
        : new HashSet<>(Arrays.stream(System.getProperty("dpbx.segments").split(",")).map(Integer::valueOf).collect(java.util.stream.Collectors.toList()));

    static class Acc { double bre = 0; long slots = 0; long pubs = 0; }

    // run DIR ORDER(fs|sorted) SEGMENT BATCH CONFIGS(E:w,...) [MAXSLOTS]
    static void run(String dir, String order, int segUnit, int batch, String configs, int maxSlots, String perSegOut) throws Exception {
        List<String> dataType = DatasetParameterUtils.getDataType(dir, "status.txt");
        File[] files = new File(dir, "runInput").listFiles(new NumberTxtFilter());
        if (order.equals("sorted")) Arrays.sort(files, Comparator.comparing(File::getName));
        else if (order.startsWith("shuffle")) {
            Collections.shuffle(Arrays.asList(files), new Random(Long.parseLong(order.substring(7))));
        }
        int total = Math.min(files.length, maxSlots);
        String[] cs = configs.split(",");
        double[] eps = new double[cs.length]; int[] ws = new int[cs.length];
        for (int k = 0; k < cs.length; k++) { String[] a = cs[k].split(":"); eps[k] = Double.parseDouble(a[0]); ws[k] = Integer.parseInt(a[1]); }
        Acc[] bd = new Acc[cs.length], ba = new Acc[cs.length];
        for (int k = 0; k < cs.length; k++) { bd[k] = new Acc(); ba[k] = new Acc(); }
        double zeroErr = 0;
        PrintWriter seg = perSegOut == null ? null : new PrintWriter(perSegOut);
        if (seg != null) seg.println("segment,first_file,last_file,mean_c1,min_c1,max_c1," + configs.replace(",", "_bd,") + "_bd");
        StringBuilder firstNames = new StringBuilder();
        for (int i = 0; i < Math.min(8, total); i++) firstNames.append(files[i].getName()).append(' ');
        System.out.println("order=" + order + " first files: " + firstNames);
        long t0 = System.currentTimeMillis();
        for (int s = 0, segID = 0; s < total; s += segUnit, segID++) {
            int e = Math.min(s + segUnit - 1, total - 1);
            NonPrivacyMechanism np = new NonPrivacyMechanism(dataType);
            WEventMechanism[] bdm = new WEventMechanism[cs.length], bam = new WEventMechanism[cs.length];
            double[] segBd = new double[cs.length];
            for (int k = 0; k < cs.length; k++) {
                bdm[k] = new BudgetDistribution(dataType, eps[k], ws[k]);
                bam[k] = new BudgetAbsorption(dataType, eps[k], ws[k]);
            }
            List<List<StreamDataElement<Boolean>>> batchData = new ArrayList<>();
            double sumC1 = 0, minC1 = 1e18, maxC1 = -1; int nSeg = 0;
            int batchID = 0;
            for (int i = s; i <= e; i++) {
                batchData.add(DatasetParameterUtils.getData(files[i].getAbsolutePath(), dataType));
                // their flush rule: (i+1) % singleBatchSize == 0 || i == timeStampDataFiles.length - 1
                if ((i + 1) % batch == 0 || i == files.length - 1 || i == total - 1) {
                    PurePair<ExperimentResult, List<StreamCountData>> npr = _0_NonPrivacyMechanismRun.runBatch(np, batchID, batchData);
                    List<StreamCountData> raw = npr.getValue();
                    for (StreamCountData r : raw) {
                        TreeMap<String, Integer> m = r.getDataMap();
                        double c1 = m.get("1"); sumC1 += c1; nSeg++;
                        minC1 = Math.min(minC1, c1); maxC1 = Math.max(maxC1, c1);
                        double z = 0; for (Integer v : m.values()) z += (double) v * v;
                        zeroErr += z / m.size();
                    }
                    for (int k = 0; k < cs.length; k++) {
                        double b1 = bre(_1_WEventMechanismRun.runBatch(bdm[k], batchID, batchData, raw));
                        bd[k].bre += b1; bd[k].slots += batchData.size(); segBd[k] += b1;
                        ba[k].bre += bre(_1_WEventMechanismRun.runBatch(bam[k], batchID, batchData, raw)); ba[k].slots += batchData.size();
                    }
                    batchID++;
                    batchData.clear();
                }
            }
            if (seg != null) {
                StringBuilder sb = new StringBuilder();
                sb.append(segID).append(',').append(files[s].getName()).append(',').append(files[e].getName()).append(',')
                  .append(sumC1 / nSeg).append(',').append(minC1).append(',').append(maxC1);
                for (int k = 0; k < cs.length; k++) sb.append(',').append(segBd[k] / nSeg);
                seg.println(sb);
            }
            if (segID % 4 == 0) System.out.printf("segment %d done, %.0f s%n", segID, (System.currentTimeMillis() - t0) / 1000.0);
        }
        if (seg != null) seg.close();
        long slots = bd[0].slots;
        System.out.printf("slots=%d  zero-release AMRE=%.2f%n", slots, zeroErr / slots);
        for (int k = 0; k < cs.length; k++) {
            System.out.printf("E=%s w=%d  BD AMRE=%.2f  BA AMRE=%.2f%n", eps[k], ws[k], bd[k].bre / bd[k].slots, ba[k].bre / ba[k].slots);
        }
        System.out.printf("time %.0f s%n", (System.currentTimeMillis() - t0) / 1000.0);
    }

    static double bre(ExperimentResult r) {
        int idx = r.attributeList.indexOf("BRE");
        return Double.parseDouble(r.valueList.get(idx));
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("gen")) gen(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]), Double.parseDouble(args[4]), Long.parseLong(args[5]));
        else if (args[0].equals("counts")) counts(args[1], args[2]);
        else if (args[0].equals("fast")) fast(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5], Integer.parseInt(args[6]));
        else if (args[0].equals("pubs")) pubs(args[1], args[2], Integer.parseInt(args[3]), args[4], Integer.parseInt(args[5]));
        else if (args[0].equals("walk")) walk(Integer.parseInt(args[1]), Double.parseDouble(args[2]), Long.parseLong(args[3]), args[4]);
        else if (args[0].equals("genfn")) genFn(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]), args[4]);
        else if (args[0].equals("params")) params(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]), Integer.parseInt(args[4]));
        else if (args[0].equals("dpbx")) dpbx(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5], Integer.parseInt(args[6]), args[7],
                 args.length > 8 ? Long.parseLong(args[8]) : System.nanoTime());
        else run(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5],
                 args.length > 6 ? Integer.parseInt(args[6]) : Integer.MAX_VALUE, args.length > 7 ? args[7] : null);
    }
}
