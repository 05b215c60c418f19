// BindingsBench (Java): the Java side of bench/bindings/run_bindings_bench.sh.
// It does exactly what bench/bindings/c/bindings_bench.c does, through
// org.dp, and prints the same line (see that file for the method).
//
//   java -cp dp.jar:. BindingsBench call ITERS          per-call cost of a 1-op net
//   java -cp dp.jar:. BindingsBench train STEPS MODEL   training steps of a model
import java.util.Arrays;
import org.dp.Model;
import org.dp.Net;
import org.dp.NetDef;
import org.dp.Tensor;
import org.dp.TrainingNets;
import org.dp.Workspace;

public final class BindingsBench {
  private static final String ONE_OP_NET =
      "{\"name\":\"one_op\",\"external_inputs\":[\"x\"],\"external_outputs\":[\"y\"],"
          + "\"ops\":[{\"type\":\"Copy\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}";
  private static final int N_ELEM = 16;
  private static final int BLOCKS = 5;
  private static final int BATCH = 256;
  private static final int NUM_BATCHES = 4;
  private static final int PIXELS = 784;
  private static final int WARMUP_STEPS = 20;

  private static long rng = 0x9E3779B97F4A7C15L;

  private static long nextU64() {
    rng ^= rng >>> 12;
    rng ^= rng << 25;
    rng ^= rng >>> 27;
    return rng * 0x2545F4914F6CDD1DL;
  }

  private static double median(double[] v) {
    Arrays.sort(v);
    int n = v.length;
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }

  /** One feed + run + fetch round. */
  private static float[] roundTrip(Workspace ws, Net net, float[] in) {
    ws.feed("x", in, N_ELEM);
    net.run();
    return ws.fetchFloats("y");
  }

  private static void benchCall(int iters) {
    float[] in = new float[N_ELEM];
    for (int i = 0; i < N_ELEM; ++i) in[i] = i;
    try (NetDef def = NetDef.fromJson(ONE_OP_NET);
        Workspace ws = Workspace.create()) {
      ws.feed("x", in, N_ELEM);
      try (Net net = Net.create(ws, def)) {
        int perBlock = iters / BLOCKS, roundsPerBlock = iters / 4 / BLOCKS;
        double[] runNs = new double[BLOCKS];
        double[] roundNs = new double[BLOCKS];
        for (int i = 0; i < iters / 2; ++i) net.run();
        for (int b = 0; b < BLOCKS; ++b) {
          long t0 = System.nanoTime();
          for (int i = 0; i < perBlock; ++i) net.run();
          runNs[b] = (double) (System.nanoTime() - t0) / perBlock;
        }
        float[] out = null;
        for (int i = 0; i < iters / 8; ++i) out = roundTrip(ws, net, in);
        for (int b = 0; b < BLOCKS; ++b) {
          long t0 = System.nanoTime();
          for (int i = 0; i < roundsPerBlock; ++i) out = roundTrip(ws, net, in);
          roundNs[b] = (double) (System.nanoTime() - t0) / roundsPerBlock;
        }
        if (out[N_ELEM - 1] != N_ELEM - 1) {
          System.err.printf("bindings_bench: y[%d] = %g, want %d%n", N_ELEM - 1, out[N_ELEM - 1], N_ELEM - 1);
          System.exit(1);
        }
        System.out.printf("call lang=java iters=%d run_ns=%.1f round_ns=%.1f%n", perBlock * BLOCKS,
            median(runNs), median(roundNs));
      }
    }
  }

  private static void benchTrain(int steps, String modelPath) {
    int xn = BATCH * PIXELS;
    float[] xs = new float[NUM_BATCHES * xn];
    int[] ys = new int[NUM_BATCHES * BATCH];
    for (int i = 0; i < xs.length; ++i) xs[i] = (float) (nextU64() >>> 40) / (float) (1 << 24);
    for (int i = 0; i < ys.length; ++i) ys[i] = (int) Long.remainderUnsigned(nextU64(), 10);
    Tensor[] tx = new Tensor[NUM_BATCHES];
    Tensor[] ty = new Tensor[NUM_BATCHES];
    for (int k = 0; k < NUM_BATCHES; ++k) {
      tx[k] = Tensor.of(Arrays.copyOfRange(xs, k * xn, (k + 1) * xn), BATCH, 1, 28, 28);
      ty[k] = Tensor.of(Arrays.copyOfRange(ys, k * BATCH, (k + 1) * BATCH), BATCH);
    }
    try (Model model = Model.fromFile(modelPath);
        TrainingNets nets = model.buildTraining(null);
        Workspace ws = Workspace.create();
        Net init = Net.create(ws, nets.init);
        Net train = Net.create(ws, nets.train)) {
      init.run();
      double[] times = new double[steps];
      for (int s = -WARMUP_STEPS; s < steps; ++s) {
        int k = (s + WARMUP_STEPS) % NUM_BATCHES;
        long t0 = System.nanoTime();
        ws.feed("data", tx[k]);
        ws.feed("label", ty[k]);
        train.run();
        if (s >= 0) times[s] = (System.nanoTime() - t0) * 1e-9;
      }
      float lastLoss = ws.fetchFloats("loss")[0];
      double med = median(times);
      System.out.printf("train lang=java steps=%d batch=%d median_ms=%.3f samples_per_s=%.1f last_loss=%.6f%n",
          steps, BATCH, med * 1e3, BATCH / med, lastLoss);
    } finally {
      for (int k = 0; k < NUM_BATCHES; ++k) {
        tx[k].close();
        ty[k].close();
      }
    }
  }

  public static void main(String[] args) {
    int n = -1;
    try {
      if (args.length >= 2) n = Integer.parseInt(args[1]);
    } catch (NumberFormatException e) {
      n = -1;
    }
    if (args.length >= 2 && args[0].equals("call") && n >= 20 * BLOCKS) {
      benchCall(n);
    } else if (args.length >= 3 && args[0].equals("train") && n >= 1) {
      benchTrain(n, args[2]);
    } else {
      System.err.println("usage: BindingsBench call ITERS (>= 100) | train STEPS MODEL_JSON");
      System.exit(2);
    }
  }
}
