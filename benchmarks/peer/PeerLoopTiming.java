// Times the per-run loop of streamdp-benchmark's central mechanisms (Schaler et al., VLDB 2023).
//
// This file is wevent's own driver. It calls the peer's classes (mechanisms.Uniform, Sample, BD,
// BA, FAST_w, Pegasus, DSAT, AdaPub, RescueDP_MD and experiment.LaplaceStream), which are NOT
// part of the wevent repository: see README.md beside this file for where they come from.
// Nothing of the peer's code is copied here.
//
// Arguments: STREAM_CSV W EPSILON REPETITIONS OUT_JSON [MECHANISMS]
//   STREAM_CSV  one slot per line, the d counts of the slot's histogram (comma separated)
//   W EPSILON   the w-event window and budget every mechanism gets
//   REPETITIONS timed runs per mechanism after as many untimed warm-up runs
//   OUT_JSON    where the figures go (one JSON object)
//   MECHANISMS  the peer classes to time, in this order: one name or a comma-separated list of
//               Uniform, Sample, BD, BA, FAST_w, Pegasus, DSAT, AdaPub, RescueDP_MD; "others" for
//               the last five, "all" for the nine; without it, the first four

import experiment.LaplaceStream;
import mechanisms.AdaPub;
import mechanisms.BA;
import mechanisms.BD;
import mechanisms.DSAT;
import mechanisms.FAST_w;
import mechanisms.Mechansim;
import mechanisms.Pegasus;
import mechanisms.RescueDP_MD;
import mechanisms.Sample;
import mechanisms.Uniform;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Supplier;

public final class PeerLoopTiming {
    private static double sink; // keeps every run's result observable

    private PeerLoopTiming() {}

    private static ArrayList<double[]> readStream(Path csv) throws IOException {
        ArrayList<double[]> rows = new ArrayList<>();
        for (String line : Files.readAllLines(csv, StandardCharsets.UTF_8)) {
            String trimmed = line.strip();
            if (trimmed.isEmpty()) {
                continue;
            }
            String[] cells = trimmed.split(",");
            double[] row = new double[cells.length];
            for (int i = 0; i < cells.length; i++) {
                row[i] = Double.parseDouble(cells[i]);
            }
            rows.add(row);
        }
        return rows;
    }

    private static long oneRun(Mechansim m, ArrayList<double[]> stream, int w, double eps) {
        long start = System.nanoTime();
        ArrayList<double[]> out = m.run(stream, w, eps);
        long elapsed = System.nanoTime() - start;
        sink += out.get(out.size() - 1)[0];
        return elapsed;
    }

    private static double quantile(long[] sorted, double q) {
        double pos = q * (sorted.length - 1);
        int lo = (int) Math.floor(pos);
        int hi = Math.min(lo + 1, sorted.length - 1);
        return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
    }

    /**
     * The peer's mechanisms by class name, each built as its own experiment builds it
     * (experiment.Experiment: the constructor without arguments; the loop entry run(stream, w, eps)
     * then sets w and eps). The first four keep the (w, eps) constructor of the first version of
     * this driver, which peer_loop.json was measured with (run sets the same w and eps).
     */
    private static Map<String, Supplier<Mechansim>> catalogue(int w, double eps) {
        Map<String, Supplier<Mechansim>> all = new LinkedHashMap<>();
        all.put("Uniform", () -> new Uniform(w, eps));
        all.put("Sample", () -> new Sample(w, eps));
        all.put("BD", () -> new BD(w, eps));
        all.put("BA", () -> new BA(w, eps));
        all.put("FAST_w", FAST_w::new);
        all.put("Pegasus", Pegasus::new);
        all.put("DSAT", DSAT::new);
        all.put("AdaPub", AdaPub::new);
        all.put("RescueDP_MD", RescueDP_MD::new);
        return all;
    }

    private static List<String> chosen(String arg, Map<String, Supplier<Mechansim>> all) {
        List<String> names = new ArrayList<>(all.keySet());
        if (arg == null) {
            return names.subList(0, 4);
        }
        if (arg.equals("others")) {
            return names.subList(4, names.size());
        }
        if (arg.equals("all")) {
            return names;
        }
        List<String> out = new ArrayList<>();
        for (String name : arg.split(",")) {
            if (!all.containsKey(name)) {
                System.err.println("unknown mechanism " + name + " (one of " + names
                        + ", \"others\" or \"all\")");
                System.exit(2);
            }
            out.add(name);
        }
        return out;
    }

    /**
     * The parameters a mechanism runs with: every field of a primitive, boxed or String type that
     * its class declares (static or not), read by reflection after its first run: the defaults,
     * what run derived from w and eps, and the values of its loop state at the end of that run.
     */
    private static String parameters(Mechansim m) {
        StringBuilder out = new StringBuilder();
        for (Field f : m.getClass().getDeclaredFields()) {
            Class<?> type = f.getType();
            boolean simple = type.isPrimitive() || type == String.class
                    || Number.class.isAssignableFrom(type) || type == Boolean.class;
            if (!simple || f.isSynthetic()) {
                continue;
            }
            Object value;
            try {
                f.setAccessible(true);
                value = f.get(Modifier.isStatic(f.getModifiers()) ? null : m);
            } catch (ReflectiveOperationException | RuntimeException e) {
                value = "unreadable";
            }
            if (out.length() > 0) {
                out.append(", ");
            }
            String text = String.valueOf(value);
            boolean quoted = !(value instanceof Number || value instanceof Boolean);
            out.append('"').append(f.getName()).append("\": ")
                    .append(quoted ? "\"" + text + "\"" : text);
        }
        return "{" + out + "}";
    }

    private static String loadAverage() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).strip();
        } catch (IOException e) {
            return "unknown";
        }
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 5 && args.length != 6) {
            System.err.println(
                    "usage: PeerLoopTiming STREAM_CSV W EPSILON REPETITIONS OUT_JSON [MECHANISMS]");
            System.exit(2);
        }
        // With one MECHANISM, only that one runs: its first run is then in a fresh JVM (with
        // several, only the first one's is; the others' first runs follow its warm-up in the JVM).
        String only = args.length == 6 ? args[5] : null;
        long processStart = System.nanoTime();
        ArrayList<double[]> stream = readStream(Path.of(args[0]));
        int w = Integer.parseInt(args[1]);
        double eps = Double.parseDouble(args[2]);
        int reps = Integer.parseInt(args[3]);
        Map<String, Supplier<Mechansim>> all = catalogue(w, eps);
        List<String> names = chosen(only, all);
        String loadBefore = loadAverage();

        // The peer draws its Laplace noise from a table it fills when the class loads
        // (10^7 draws); that is start-up, timed apart from the loops.
        long initStart = System.nanoTime();
        double first = LaplaceStream.nextNumber();
        long initNs = System.nanoTime() - initStart;
        sink += first;

        StringBuilder rows = new StringBuilder();
        System.out.printf(Locale.ROOT, "%-12s %12s %12s %12s %12s%n",
                "mechanism", "first ms", "median ms", "p10 ms", "p90 ms");
        boolean fresh = true; // no run of any mechanism before this one in this JVM
        for (String key : names) {
            Mechansim m = all.get(key).get();
            long firstNs = oneRun(m, stream, w, eps);
            String params = parameters(m);
            for (int i = 0; i < reps; i++) {
                oneRun(m, stream, w, eps); // warm-up: the JIT compiles the loop
            }
            long[] times = new long[reps];
            for (int i = 0; i < reps; i++) {
                times[i] = oneRun(m, stream, w, eps);
            }
            Arrays.sort(times);
            double median = quantile(times, 0.5) / 1e6;
            double p10 = quantile(times, 0.1) / 1e6;
            double p90 = quantile(times, 0.9) / 1e6;
            System.out.printf(Locale.ROOT, "%-12s %12.4f %12.4f %12.4f %12.4f%n",
                    key, firstNs / 1e6, median, p10, p90);
            if (rows.length() > 0) {
                rows.append(",\n");
            }
            rows.append(String.format(Locale.ROOT,
                    "    {\"mechanism\": \"%s\", \"first_ms\": %.6f, \"first_in_fresh_jvm\": %b, "
                            + "\"median_ms\": %.6f, \"p10_ms\": %.6f, \"p90_ms\": %.6f, "
                            + "\"timed_runs\": %d, \"warmup_runs\": %d, "
                            + "\"peer_name\": \"%s\", \"parameters\": %s}",
                    key, firstNs / 1e6, fresh, median, p10, p90, reps, reps,
                    m.name(), params));
            fresh = false;
        }
        double processMs = (System.nanoTime() - processStart) / 1e6;
        String json = String.format(Locale.ROOT,
                "{\n  \"peer\": \"streamdp-benchmark (Schaler et al., VLDB 2023)\",\n"
                        + "  \"slots\": %d,\n  \"domain\": %d,\n  \"users\": %d,\n"
                        + "  \"w\": %d,\n  \"epsilon\": %s,\n"
                        + "  \"truncate\": %b,\n  \"non_private_sampling\": %b,\n"
                        + "  \"laplace_table_ms\": %.3f,\n  \"driver_ms\": %.3f,\n"
                        + "  \"java\": \"%s %s\",\n  \"measured_at\": \"%s\",\n"
                        + "  \"loadavg_before\": \"%s\",\n  \"loadavg_after\": \"%s\",\n"
                        + "  \"runs\": [\n%s\n  ]\n}\n",
                stream.size(), stream.get(0).length, (long) Arrays.stream(stream.get(0)).sum(),
                w, Double.toString(eps), Mechansim.TRUNCATE, Mechansim.USE_NON_PRIVATE_SAMPLING,
                initNs / 1e6, processMs,
                System.getProperty("java.vm.name"), System.getProperty("java.version"),
                Instant.now().toString(), loadBefore, loadAverage(), rows);
        Files.writeString(Path.of(args[4]), json, StandardCharsets.UTF_8);
        System.out.println("laplace table (start-up): " + String.format(Locale.ROOT, "%.1f ms", initNs / 1e6));
        System.out.println("(checksum " + sink + ")");
    }
}
