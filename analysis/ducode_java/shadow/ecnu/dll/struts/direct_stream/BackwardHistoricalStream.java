package ecnu.dll.struts.direct_stream;

import java.util.ArrayList;
import java.util.List;

// Stand-in (wevent, 001 Tables 5-6; speed and start-up only) for the authors' per-user record of
// the calculation and publication budgets spent at past slots. Two reasons it replaces theirs on
// the class path: theirs takes its capacity from ecnu.dll._config.Constant, whose static block
// loads parameter_config.xml through dom4j and jaxen (not installed here), and theirs answers
// "the sum of the k most recent budgets" by walking k entries each time, which DPBD asks for every
// forward element of every user at every slot (O(w^2) a user a slot). This one keeps the same
// entries (the newest MAX_KEPT, MAX_KEPT = their getMaxWindowSize() + 1 = 200 + 1 with
// parameter_config.xml's GenWindowSize 40,...,200) and, once per slot, the partial sums taken from
// the newest entry backwards starting at 0.0: the same additions in the same order, so the same
// doubles. With -Dbhs.check=true every answer is also computed by walking the entries and compared
// bit for bit (a mismatch throws).
public class BackwardHistoricalStream {
    public static final Integer Max_Backward_Window_Size = Integer.getInteger("bhs.max", 201);
    static final boolean CHECK = Boolean.getBoolean("bhs.check");

    private Integer currentTime;
    private final List<Double> calculation = new ArrayList<>();  // oldest first
    private final List<Double> publication = new ArrayList<>();
    private double[] calculationSums, publicationSums;           // [k] = sum of the k newest; null: stale

    public BackwardHistoricalStream() {
        this.currentTime = -1;
    }

    public void resetStream() {
        this.currentTime = -1;
        this.calculation.clear();
        this.publication.clear();
        this.calculationSums = null;
        this.publicationSums = null;
    }

    public void addElement(Double calculationPrivacyBudget, Double predictionPrivacyBudget) {
        ++this.currentTime;
        this.calculation.add(calculationPrivacyBudget);
        this.publication.add(predictionPrivacyBudget);
        while (this.calculation.size() > Max_Backward_Window_Size) {
            this.calculation.remove(0);
            this.publication.remove(0);
        }
        this.calculationSums = null;
        this.publicationSums = null;
    }

    private static double[] newestFirstSums(List<Double> entries) {
        double[] sums = new double[entries.size() + 1];
        double running = 0D;
        for (int j = 1; j <= entries.size(); j++) {
            running += entries.get(entries.size() - j);
            sums[j] = running;
        }
        return sums;
    }

    private static Double walk(List<Double> entries, int beforeLength) {
        Double result = 0D;
        for (int j = 1; j <= beforeLength && j <= entries.size(); j++) result += entries.get(entries.size() - j);
        return result;
    }

    private static Double sum(double[] sums, List<Double> entries, int beforeLength) {
        Double result = beforeLength <= 0 ? 0D : sums[Math.min(beforeLength, entries.size())];
        if (CHECK) {
            Double walked = walk(entries, beforeLength);
            if (Double.doubleToRawLongBits(walked) != Double.doubleToRawLongBits(result)) {
                throw new IllegalStateException("partial sum " + result + " != walked sum " + walked + " for " + beforeLength);
            }
        }
        return result;
    }

    public Double getHistoricalCalculationBudgetSum(int beforeLength) {
        if (this.calculationSums == null) this.calculationSums = newestFirstSums(this.calculation);
        return sum(this.calculationSums, this.calculation, beforeLength);
    }

    public Double getHistoricalPublicationBudgetSum(int beforeLength) {
        if (this.publicationSums == null) this.publicationSums = newestFirstSums(this.publication);
        return sum(this.publicationSums, this.publication, beforeLength);
    }

    public Double getHistoricalBudgetSum(int beforeLength) {
        return this.getHistoricalCalculationBudgetSum(beforeLength) + this.getHistoricalPublicationBudgetSum(beforeLength);
    }

    public Double getHistoricalMaxBudgetSumWithinCalculationAndPublication(int beforeLength) {
        return Math.max(this.getHistoricalCalculationBudgetSum(beforeLength), this.getHistoricalPublicationBudgetSum(beforeLength));
    }
}
