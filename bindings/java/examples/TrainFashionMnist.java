import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import org.dp.Checkpoint;
import org.dp.CheckpointInfo;
import org.dp.DType;
import org.dp.Dp;
import org.dp.DpException;
import org.dp.Loader;
import org.dp.LoaderOptions;
import org.dp.Model;
import org.dp.Net;
import org.dp.NetDef;
import org.dp.ParallelModel;
import org.dp.ParallelOptions;
import org.dp.Tensor;
import org.dp.TrainingNets;
import org.dp.TrainingOptions;
import org.dp.Workspace;

/**
 * Port of samples/train_fashion_mnist.c to the Java binding, with the same flags and output and its
 * batches from dp's input pipeline ({@link Loader}): for the same seed its final line (samples_per_s
 * aside) equals the C sample's. After training it serves the model through its inference net
 * ({@link Model#buildInference}: "data" to "softmax", no labels) in a workspace of its own sharing the
 * trained param tensors; when the JVM runs on a terminal (it has a console) it redraws a progress line
 * within each epoch.
 *
 * <pre>
 * java -cp dp.jar:. -Djava.library.path=DIR TrainFashionMnist [--model mlp|cnn|PATH.json]
 *     [--epochs E] [--batch B] [--lr LR] [--seed S] [--data DIR] [--nets DIR] [--limit N]
 *     [--min-acc A] [--devices cpu:N] [--checkpoint DIR [--resume] [--keep K]]
 * </pre>
 */
public final class TrainFashionMnist {
  static final int PIXELS = 28 * 28, EVAL_BATCH = 1000, CLASSES = 10, SHOWN = 8;

  /** Whether stdout is a terminal: the JVM has a console (Java 22+: one on a terminal). */
  static boolean stdoutIsTerminal() {
    java.io.Console c = System.console();
    if (c == null) return false;
    try {
      return (Boolean) java.io.Console.class.getMethod("isTerminal").invoke(c);
    } catch (ReflectiveOperationException e) {
      return true; // before Java 22 a console means stdin and stdout are terminals
    }
  }

  /** An epoch's progress line, drawn only on a terminal: redrawn in place at most every 250 ms, erased before
   * the epoch's own line. */
  static final class Progress {
    final boolean on = stdoutIsTerminal();
    long drawnAt = -1;
    int width;

    void draw(int epoch, int epochs, int step, int steps, int batch, long t0) {
      long now = System.nanoTime();
      if (!on || (drawnAt >= 0 && now - drawnAt < 250_000_000L)) return;
      drawnAt = now;
      double elapsed = (now - t0) * 1e-9;
      double rate = elapsed > 0 ? (double) step * batch / elapsed : 0;
      long left = (long) (elapsed / step * (steps - step) + 0.5);
      String line = String.format("epoch %d/%d step %d/%d %.1f samples/s %d:%02d left", epoch, epochs, step, steps,
          rate, left / 60, left % 60);
      System.out.print("\r" + line + " ".repeat(Math.max(0, width - line.length())));
      System.out.flush();
      width = line.length();
    }

    void erase() {
      if (on && width > 0) System.out.print("\r" + " ".repeat(width) + "\r");
      width = 0;
      drawnAt = -1;
    }
  }

  /**
   * Classifies the test set with the inference net ("softmax", no labels) in a workspace of its own fed the
   * trained params (replica 0's for a data-parallel model): shared tensors, not copies. Returns the share
   * whose most probable class (the first on ties, as Accuracy ranks) is the label; the first predictions go
   * to {@code predicted}.
   */
  static double serve(Model model, Workspace trained, String scope, float[] x, int[] y, int[] predicted) {
    try (NetDef def = model.buildInference(List.of("softmax"), null); Workspace ws = Workspace.create()) {
      for (String name : def.externalInputs()) {
        if (name.equals("data")) continue; // fed per batch
        try (Tensor t = trained.fetch(scope + name)) {
          ws.feed(name, t);
        }
      }
      int correct = 0;
      try (Net net = Net.create(ws, def)) {
        for (int off = 0; off < y.length; off += EVAL_BATCH) {
          int b = Math.min(EVAL_BATCH, y.length - off);
          ws.feed("data", Arrays.copyOfRange(x, off * PIXELS, (off + b) * PIXELS), b, 1, 28, 28);
          net.run();
          float[] p = ws.fetchFloats("softmax");
          for (int i = 0; i < b; ++i) {
            int best = 0;
            for (int c = 1; c < CLASSES; ++c) if (p[i * CLASSES + c] > p[i * CLASSES + best]) best = c;
            if (off + i < predicted.length) predicted[off + i] = best;
            if (best == y[off + i]) ++correct;
          }
        }
      }
      return y.length > 0 ? (double) correct / y.length : 0;
    }
  }
  static float[] x(Tensor images) {
    byte[] px = images.toByteArray();
    float[] x = new float[px.length];
    final float mean = 0.2860f, invStd = 1.0f / 0.3530f;
    for (int i = 0; i < x.length; ++i) x[i] = ((float) (px[i] & 0xff) * (1.0f / 255.0f) - mean) * invStd;
    return x;
  }

  static int[] y(Tensor labels) {
    if (labels.dtype() == DType.INT32) return labels.toIntArray();
    byte[] l = labels.toByteArray();
    int[] y = new int[l.length];
    for (int i = 0; i < l.length; ++i) y[i] = l[i] & 0xff;
    return y;
  }

  /** Feeds rows [off, off + b) of x/y as "data" [b, 1, 28, 28] and "label" [b] (copies). */
  static void feed(Workspace ws, float[] x, int[] y, int off, int b) {
    ws.feed("data", Arrays.copyOfRange(x, off * PIXELS, (off + b) * PIXELS), b, 1, 28, 28);
    ws.feed("label", Arrays.copyOfRange(y, off, off + b), b);
  }

  /**
   * The input pipeline over the first n training samples (copied into dp tensors, which the loader
   * reads in place). With several processes each is fed its part of every global batch.
   */
  static Loader trainingLoader(Workspace ws, float[] x, int[] y, int n, int batch, long seed,
      ParallelModel parallel) {
    try (Tensor tx = Tensor.of(Arrays.copyOf(x, n * PIXELS), n, 1, 28, 28);
         Tensor ty = Tensor.of(Arrays.copyOf(y, n), n)) {
      LoaderOptions o = new LoaderOptions().batchSize(batch).seed(seed);
      if (parallel != null) o.shards(parallel.numShards(), parallel.shardId());
      return Loader.create(ws, List.of("data", "label"), List.of(tx, ty), o);
    }
  }

  static double scalar(Workspace ws, String name) {
    return ws.fetchFloats(name)[0];
  }

  static void usage() {
    System.err.println("usage: TrainFashionMnist [--model mlp|cnn|PATH.json] [--epochs E] [--batch B] [--lr LR]"
        + " [--seed S]\n          [--data DIR] [--nets DIR] [--limit N] [--min-acc A] [--devices cpu:N|cuda:N]\n"
        + "          [--checkpoint DIR [--resume] [--keep K]]");
    System.exit(2);
  }

  public static void main(String[] args) throws Exception {
    String modelArg = "mlp", data = "/usr/share/datasets/fashion-mnist", nets = null, ckpt = null;
    long epochs = 3, batch = 64, limit = 0, seed = 1, keep = 3;
    double lr = 0, minAcc = -1;
    int deviceType = -1, numDevices = 0;
    boolean resume = false;
    for (int i = 0; i < args.length; ++i) {
      String a = args[i];
      if (a.equals("--resume")) {
        resume = true;
        continue;
      }
      if (i + 1 >= args.length) usage();
      String v = args[++i];
      try {
        switch (a) {
          case "--model": modelArg = v; break;
          case "--epochs": epochs = Long.parseLong(v); break;
          case "--batch": batch = Long.parseLong(v); break;
          case "--limit": limit = Long.parseLong(v); break;
          case "--seed": seed = Long.parseLong(v); break;
          case "--lr": lr = Double.parseDouble(v); break;
          case "--min-acc": minAcc = Double.parseDouble(v); break;
          case "--checkpoint": ckpt = v; break;
          case "--keep": keep = Long.parseLong(v); break;
          case "--data": data = v; break;
          case "--nets": nets = v; break;
          case "--devices": {
            int c = v.indexOf(':');
            if (c < 0) usage();
            String kind = v.substring(0, c);
            if (kind.equals("cpu")) deviceType = Dp.DEVICE_CPU;
            else if (kind.equals("cuda")) deviceType = Dp.DEVICE_CUDA;
            else usage();
            numDevices = Integer.parseInt(v.substring(c + 1));
            if (numDevices < 1 || numDevices > 64) usage();
            break;
          }
          default: usage();
        }
      } catch (NumberFormatException e) {
        System.err.println("TrainFashionMnist: bad value for " + a + ": '" + v + "'");
        System.exit(2);
      }
    }
    if (epochs < 1 || batch < 1 || limit < 0 || lr < 0 || minAcc > 1) usage();
    if (resume && ckpt == null) {
      System.err.println("TrainFashionMnist: --resume needs --checkpoint DIR");
      System.exit(2);
    }
    // The checkpoint directory is made when missing (not its parents).
    if (ckpt != null && !Files.isDirectory(Paths.get(ckpt))) {
      try {
        Files.createDirectory(Paths.get(ckpt));
      } catch (java.io.IOException e) {
        System.err.println("TrainFashionMnist: cannot create checkpoint directory '" + ckpt + "': " + e);
        System.exit(1);
      }
    }
    String modelPath = modelArg;
    if (modelArg.equals("mlp") || modelArg.equals("cnn")) {
      String file = modelArg.equals("mlp") ? "fashion_mlp.json" : "fashion_cnn.json";
      modelPath = (nets != null ? nets : "samples/nets") + "/" + file;
    }
    try {
      run(modelPath, data, ckpt, resume, (int) epochs, (int) batch, (int) limit, seed, lr, minAcc, keep,
          deviceType, numDevices);
    } catch (DpException e) {
      System.err.println("TrainFashionMnist: [" + e.codeName() + "] " + e.getMessage());
      System.exit(1);
    }
  }

  static void run(String modelPath, String data, String ckpt, boolean resume, int epochs, int batch, int limit,
      long seed, double lr, double minAcc, long keep, int deviceType, int numDevices) {
    System.out.println("dp " + Dp.version());
    float[] trainX, testX;
    int[] trainY, testY;
    try (Tensor a = Tensor.fromIdxFile(data + "/train-images-idx3-ubyte.gz");
         Tensor b = Tensor.fromIdxFile(data + "/train-labels-idx1-ubyte.gz");
         Tensor c = Tensor.fromIdxFile(data + "/t10k-images-idx3-ubyte.gz");
         Tensor d = Tensor.fromIdxFile(data + "/t10k-labels-idx1-ubyte.gz")) {
      trainX = x(a);
      trainY = y(b);
      testX = x(c);
      testY = y(d);
    }
    int nTrain = trainY.length, nTest = testY.length;
    if (limit > 0 && limit < nTrain) nTrain = limit;
    if (nTrain < batch) {
      System.err.println("TrainFashionMnist: " + nTrain + " training samples make no full batch of " + batch);
      System.exit(1);
    }
    ParallelModel parallel = null;
    try (Model model = Model.fromFile(modelPath)) {
      TrainingNets defs;
      if (deviceType < 0) {
        defs = model.buildTraining(new TrainingOptions().lr(lr));
      } else {
        ParallelOptions o = deviceType == Dp.DEVICE_CPU ? ParallelOptions.cpu(numDevices) : new ParallelOptions();
        if (deviceType != Dp.DEVICE_CPU) {
          o.deviceType = deviceType;
          o.deviceIds = new int[numDevices];
          for (int i = 0; i < numDevices; ++i) o.deviceIds[i] = i;
        }
        o.lr = lr;
        o.sharedModelAuto = true; // dp picks, as in the C sample: one shared model where the replicas share a cache
        parallel = model.parallelize(o);
        defs = parallel.nets();
        System.out.println("data parallel over " + parallel.numReplicas() + " replicas (" + parallel.scope(0)
            + " ... " + parallel.scope(parallel.numReplicas() - 1) + ")");
      }
      try (TrainingNets d = defs; Workspace ws = Workspace.create(); Net init = Net.create(ws, d.init);
           Net train = Net.create(ws, d.train); Net eval = Net.create(ws, d.eval);
           Loader loader = trainingLoader(ws, trainX, trainY, nTrain, batch, seed, parallel)) {
        init.run();
        int steps = (int) loader.stepsPerEpoch();
        String lrText = lr > 0 ? String.format("%s", fmtG(lr)) : "the model's";
        System.out.printf("model %s: train %d (%d steps of %d), test %d, epochs %d, lr %s, seed %d%n", modelPath,
            nTrain, steps, batch, nTest, epochs, lrText, seed);
        int firstEpoch = 1;
        if (resume) {
          long done = resumeFrom(ckpt, model, parallel, ws);
          if (done % steps != 0) {
            System.err.println("TrainFashionMnist: the checkpoint's iteration " + done
                + " is not a whole number of epochs of " + steps + " steps");
            System.exit(1);
          }
          // The loader's order depends only on the seed and the epoch.
          firstEpoch = 1 + (int) (done / steps);
          loader.seek(firstEpoch - 1, 0);
        }
        double totalTime = 0, lastLoss = 0, lastAcc = 0;
        Progress progress = new Progress();
        for (int e = firstEpoch; e <= epochs; ++e) {
          double lossSum = 0;
          long t0 = System.nanoTime();
          for (int step = 1; loader.next(); ++step) { // until the epoch's end
            train.run();
            lossSum += scalar(ws, "loss");
            progress.draw(e, epochs, step, steps, batch, t0);
          }
          double dt = (System.nanoTime() - t0) * 1e-9;
          progress.erase();
          totalTime += dt;
          lastLoss = lossSum / steps;
          double correct = 0;
          for (int off = 0; off < nTest; off += EVAL_BATCH) {
            int b = Math.min(EVAL_BATCH, nTest - off);
            feed(ws, testX, testY, off, b);
            eval.run();
            correct += scalar(ws, "accuracy") * b;
          }
          lastAcc = nTest > 0 ? correct / nTest : 0;
          if (ckpt != null) {
            String path = Paths.get(ckpt, Checkpoint.stepFileName((long) e * steps)).toString();
            if (parallel != null) parallel.save(ws, path, null);
            else Checkpoint.save(ws, model.checkpointBlobs(), path, null);
            Checkpoint.prune(ckpt, (int) keep);
          }
          System.out.printf("epoch %d/%d loss=%.4f test_acc=%.4f samples_per_s=%.1f%n", e, epochs, lastLoss,
              lastAcc, steps * (double) batch / dt);
        }
        int trained = epochs - firstEpoch + 1;

        // Serving: the test set through the inference net, which must classify exactly as the eval net did.
        int[] predicted = new int[Math.min(SHOWN, nTest)];
        double inferAcc = serve(model, ws, parallel != null ? parallel.scope(0) : "", testX, testY, predicted);
        StringBuilder line = new StringBuilder(String.format("inference: test_acc=%.4f predicted", inferAcc));
        for (int c : predicted) line.append(' ').append(c);
        line.append(" labels");
        for (int i = 0; i < predicted.length; ++i) line.append(' ').append(testY[i]);
        System.out.println(line);
        if (trained > 0 && Math.abs(inferAcc - lastAcc) > 0.5 / Math.max(1, nTest)) {
          System.err.printf("TrainFashionMnist: the inference net's test accuracy %.6f is not the eval net's %.6f%n",
              inferAcc, lastAcc);
          System.exit(1);
        }
        System.out.printf("final test_acc=%.4f train_loss=%.4f samples_per_s=%.1f%n", lastAcc, lastLoss,
            trained > 0 ? steps * (double) batch * trained / totalTime : 0.0);
        if (minAcc >= 0 && !(lastAcc >= minAcc)) {
          System.err.printf("TrainFashionMnist: test accuracy %.4f is below --min-acc %.4f%n", lastAcc, minAcc);
          System.exit(3);
        }
      }
    } finally {
      if (parallel != null) parallel.close();
    }
  }

  /** C's %g for the lr line. */
  static String fmtG(double v) {
    String s = String.format("%g", v);
    if (s.contains("e")) return s;
    return s.contains(".") ? s.replaceAll("0+$", "").replaceAll("\\.$", "") : s;
  }

  static long resumeFrom(String dir, Model model, ParallelModel parallel, Workspace ws) {
    for (String path : Checkpoint.listSteps(dir)) {
      long iteration;
      try (CheckpointInfo info = CheckpointInfo.fromFile(path)) {
        iteration = info.iteration();
        if (parallel != null) parallel.load(ws, path, null);
        else Checkpoint.load(ws, path, null);
      } catch (DpException e) {
        System.err.println("TrainFashionMnist: cannot resume from " + path + ": [" + e.codeName() + "] "
            + e.getMessage() + "; trying an older one");
        continue;
      }
      if (iteration > 0) {
        System.out.println("resumed from " + path + " (iteration " + iteration + ")");
        return iteration;
      }
      System.err.println("TrainFashionMnist: " + path + " records no iteration; skipping it");
    }
    System.out.println("no checkpoint to resume from in " + dir + "; starting afresh");
    return 0;
  }
}
