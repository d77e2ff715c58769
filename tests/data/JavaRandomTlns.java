// Generates tests/data/java_random_tlns.txt, the Java fixture of analysis/pwsm_tlns_java.py.
// Run (Java 17): javac -d /tmp JavaRandomTlns.java && java -cp /tmp JavaRandomTlns > java_random_tlns.txt
// Lines: "gauss SEED I HEX" (the I-th nextGaussian of new Random(SEED), Double.toHexString);
// "walk T HEX" (for T <= 300 and every 50th T: p_T of the TLNS walk: p_0 = 0.05, p_t = p_{t-1} + 0.0025 nextGaussian of
// new Random(1), rounded half-up to 0.01 through BigDecimal, then clamped to [0, 1]);
// "clip T below|above" for every clamped slot of the 10,000; "clips BELOW ABOVE".
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.Random;

public class JavaRandomTlns {
  public static void main(String[] args) {
    for (long seed : new long[] {1L, 42L}) {
      Random r = new Random(seed);
      for (int i = 0; i < 100; i++) {
        System.out.println("gauss " + seed + " " + i + " " + Double.toHexString(r.nextGaussian()));
      }
    }
    Random r = new Random(1L);
    double cur = 0.05;
    int below = 0, above = 0;
    for (int t = 1; t <= 10000; t++) {
      cur = new BigDecimal(cur + r.nextGaussian() * 0.0025).setScale(2, RoundingMode.HALF_UP).doubleValue();
      if (cur < 0) {
        below++;
        cur = 0;
        System.out.println("clip " + t + " below");
      } else if (cur > 1) {
        above++;
        cur = 1;
        System.out.println("clip " + t + " above");
      }
      if (t <= 300 || t % 50 == 0) {
        System.out.println("walk " + t + " " + Double.toHexString(cur));
      }
    }
    System.out.println("clips " + below + " " + above);
  }
}
