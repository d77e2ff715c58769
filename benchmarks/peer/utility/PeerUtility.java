import cn.edu.dll.struct.pair.CombinePair;
import hnu.dll.schemes.compare_scheme._1_non_personalized.LPMechanism;
import hnu.dll.schemes.compare_scheme._1_non_personalized.impl.LDPPopulationAbsorption;
import hnu.dll.schemes.compare_scheme._1_non_personalized.impl.LDPPopulationDistribution;
import hnu.dll.schemes.compare_scheme._2_our_baseline.impl.BaselinePLPAbsorption;
import hnu.dll.schemes.compare_scheme._2_our_baseline.impl.BaselinePLPDistribution;
import hnu.dll.schemes.main_scheme.impl.PLDPPopulationAbsorptionPlus;
import hnu.dll.schemes.main_scheme.impl.PLDPPopulationDistributionPlus;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.function.Function;

/**
 * wevent's driver of WEventPLDPCode's local mechanisms (see README.md beside it).
 *
 * <p>Reads a per-user stream ({@code user,slot,value}, values 0..d-1) and a requirements file
 * ({@code user,w,epsilon}, epsilon a decimal or a fraction p/q), feeds each slot's values, in the
 * order of the requirements file, to one mechanism, and writes what it releases at every slot:
 * {@code slot,published,f0,...,f(d-1)} (frequencies).
 *
 * <p>Mechanisms: LPD, LPA (one window and one budget: the largest window and the smallest budget
 * of the file, as wevent serves the non-personalized allocators); PLPD, PLPA (the code's baseline
 * classes); PLPD+, PLPA+ (its main classes). The population size lower bound of the distribution
 * classes is 10, the value of the code's runners. The mechanism draws all its randomness from
 * {@code new java.util.Random(seed)}.
 *
 * <pre>java PeerUtility STREAM_CSV REQUIREMENTS_CSV MECHANISM SEED OUT_CSV</pre>
 */
public final class PeerUtility {
    private static final int POPULATION_LOWER_BOUND = 10;

    private PeerUtility() {}

    private static double parseBudget(String text) {
        int slash = text.indexOf('/');
        if (slash < 0) {
            return Double.parseDouble(text);
        }
        return Double.parseDouble(text.substring(0, slash)) / Double.parseDouble(text.substring(slash + 1));
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 5) {
            System.err.println("usage: java PeerUtility STREAM_CSV REQUIREMENTS_CSV MECHANISM SEED OUT_CSV");
            System.exit(2);
        }
        String mechanism = args[2];
        long seed = Long.parseLong(args[3]);

        // requirements: the user order every slot's data list follows
        Map<String, Integer> index = new HashMap<>();
        List<Integer> windows = new ArrayList<>();
        List<Double> budgets = new ArrayList<>();
        try (BufferedReader in = Files.newBufferedReader(Paths.get(args[1]), StandardCharsets.UTF_8)) {
            String header = in.readLine();
            if (header == null || !header.trim().equals("user,w,epsilon")) {
                throw new IOException(args[1] + ": expected the header user,w,epsilon");
            }
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                String[] f = line.split(",");
                index.put(f[0], windows.size());
                windows.add(Integer.parseInt(f[1]));
                budgets.add(parseBudget(f[2]));
            }
        }
        int n = windows.size();

        // stream: slot -> value of each user (in requirement order)
        List<int[]> slots = new ArrayList<>();
        int domain = 0;
        try (BufferedReader in = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            String header = in.readLine();
            if (header == null || !header.trim().equals("user,slot,value")) {
                throw new IOException(args[0] + ": expected the header user,slot,value");
            }
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                int a = line.indexOf(',');
                int b = line.indexOf(',', a + 1);
                Integer user = index.get(line.substring(0, a));
                if (user == null) {
                    throw new IOException(args[0] + ": user without a requirement: " + line);
                }
                int slot = Integer.parseInt(line.substring(a + 1, b));
                int value = Integer.parseInt(line.substring(b + 1));
                while (slots.size() < slot) {
                    int[] row = new int[n];
                    java.util.Arrays.fill(row, -1);
                    slots.add(row);
                }
                slots.get(slot - 1)[user] = value;
                domain = Math.max(domain, value + 1);
            }
        }
        for (int t = 0; t < slots.size(); t++) {
            for (int i = 0; i < n; i++) {
                if (slots.get(t)[i] < 0) {
                    throw new IOException(args[0] + ": a user has no value at slot " + (t + 1));
                }
            }
        }
        Set<String> dataTypes = new LinkedHashSet<>();
        for (int j = 0; j < domain; j++) {
            dataTypes.add(String.valueOf(j));
        }

        Random random = new Random(seed);
        int wMax = windows.stream().mapToInt(Integer::intValue).max().orElseThrow();
        double epsMin = budgets.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
        Function<List<Integer>, CombinePair<Boolean, Map<Integer, Double>>> step;
        // the main classes print their population selection on standard output: keep it apart
        PrintStream stdout = System.out;
        System.setOut(System.err);
        switch (mechanism) {
            case "LPD": {
                LPMechanism m = new LDPPopulationDistribution(dataTypes, epsMin, wMax, n, POPULATION_LOWER_BOUND, random);
                step = m::updateNextPublicationResult;
                break;
            }
            case "LPA": {
                LPMechanism m = new LDPPopulationAbsorption(dataTypes, epsMin, wMax, n, random);
                step = m::updateNextPublicationResult;
                break;
            }
            case "PLPD": {
                BaselinePLPDistribution m = new BaselinePLPDistribution(dataTypes, budgets, windows, POPULATION_LOWER_BOUND, random);
                step = m::updateNextPublicationResult;
                break;
            }
            case "PLPA": {
                BaselinePLPAbsorption m = new BaselinePLPAbsorption(dataTypes, budgets, windows, random);
                step = m::updateNextPublicationResult;
                break;
            }
            case "PLPD+": {
                PLDPPopulationDistributionPlus m = new PLDPPopulationDistributionPlus(dataTypes, budgets, windows, POPULATION_LOWER_BOUND, random);
                System.err.println("OPS: z_opt " + m.getOptimalSamplingSize() + ", w_opt " + m.getOptimalWindowSize());
                step = m::updateNextPublicationResult;
                break;
            }
            case "PLPA+": {
                PLDPPopulationAbsorptionPlus m = new PLDPPopulationAbsorptionPlus(dataTypes, budgets, windows, random);
                System.err.println("OPS: z_opt " + m.getOptimalSamplingSize() + ", w_opt " + m.getOptimalWindowSize());
                step = m::updateNextPublicationResult;
                break;
            }
            default:
                System.err.println("unknown mechanism " + mechanism + " (LPD, LPA, PLPD, PLPA, PLPD+, PLPA+)");
                System.exit(2);
                return;
        }

        StringBuilder out = new StringBuilder("slot,published");
        for (int j = 0; j < domain; j++) {
            out.append(",f").append(j);
        }
        out.append('\n');
        for (int t = 0; t < slots.size(); t++) {
            int[] row = slots.get(t);
            List<Integer> data = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                data.add(row[i]);
            }
            CombinePair<Boolean, Map<Integer, Double>> r = step.apply(data);
            out.append(t + 1).append(',').append(r.getKey() ? 1 : 0);
            for (int j = 0; j < domain; j++) {
                out.append(',').append(r.getValue().getOrDefault(j, 0D));
            }
            out.append('\n');
        }
        System.setOut(stdout);
        try (BufferedWriter w = Files.newBufferedWriter(Paths.get(args[4]), StandardCharsets.UTF_8)) {
            w.write(out.toString());
        }
    }
}
