import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.dp.Checkpoint;
import org.dp.CheckpointLoadOptions;
import org.dp.DpException;
import org.dp.Model;
import org.dp.Net;
import org.dp.NetDef;
import org.dp.Tensor;
import org.dp.Workspace;

/**
 * Classifies the Fashion-MNIST test set from several threads at once, as a service would: the model's
 * inference net ({@link Model#buildInference}: "data" to "softmax", no labels, loss or metric), trained
 * params loaded once from a checkpoint that TrainFashionMnist --checkpoint wrote, and per worker thread a
 * workspace and a net of its own, each fed the same param tensors (shared, not copied: the params are in
 * memory once).
 *
 * <pre>
 * java -cp dp.jar:. -Djava.library.path=DIR Serve --checkpoint DIR|FILE [--model mlp|cnn|PATH.json]
 *     [--workers N] [--batch B] [--data DIR] [--nets DIR]
 * </pre>
 *
 * Each request is B test images; the workers take the next request until the test set is done. It prints
 * one line {@code served N images in R requests of B from W workers: test_acc=<acc> images_per_s=<rate>}.
 */
public final class Serve {
  static final int PIXELS = 28 * 28, CLASSES = 10;

  static void usage() {
    System.err.println("usage: Serve --checkpoint DIR|FILE [--model mlp|cnn|PATH.json] [--workers N] [--batch B]"
        + " [--data DIR] [--nets DIR]");
    System.exit(2);
  }

  /** One worker: its own workspace, fed the shared params, and its own net. Returns the images it got right. */
  static int worker(NetDef def, Map<String, Tensor> params, float[] x, int[] y, int batch, AtomicInteger next) {
    int correct = 0;
    try (Workspace ws = Workspace.create()) {
      for (Map.Entry<String, Tensor> p : params.entrySet()) ws.feed(p.getKey(), p.getValue()); // shared
      try (Net net = Net.create(ws, def)) {
        for (int first = next.getAndAdd(batch); first < y.length; first = next.getAndAdd(batch)) {
          int b = Math.min(batch, y.length - first);
          ws.feed("data", Arrays.copyOfRange(x, first * PIXELS, (first + b) * PIXELS), b, 1, 28, 28);
          net.run();
          float[] p = ws.fetchFloats("softmax");
          for (int i = 0; i < b; ++i) {
            int best = 0;
            for (int c = 1; c < CLASSES; ++c) if (p[i * CLASSES + c] > p[i * CLASSES + best]) best = c;
            if (best == y[first + i]) ++correct;
          }
        }
      }
    }
    return correct;
  }

  public static void main(String[] args) throws Exception {
    String modelArg = "mlp", ckpt = null, data = "/usr/share/datasets/fashion-mnist", nets = "samples/nets";
    int workers = 4, batch = 1;
    for (int i = 0; i < args.length; i += 2) {
      if (i + 1 >= args.length) usage();
      String v = args[i + 1];
      switch (args[i]) {
        case "--model": modelArg = v; break;
        case "--checkpoint": ckpt = v; break;
        case "--data": data = v; break;
        case "--nets": nets = v; break;
        case "--workers": workers = Integer.parseInt(v); break;
        case "--batch": batch = Integer.parseInt(v); break;
        default: usage();
      }
    }
    if (ckpt == null || workers < 1 || workers > 1024 || batch < 1 || batch > 65536) usage();
    String modelPath = modelArg.equals("mlp") || modelArg.equals("cnn") ? nets + "/fashion_" + modelArg + ".json"
                                                                       : modelArg;
    try {
      if (Files.isDirectory(Paths.get(ckpt))) {
        List<String> files = Checkpoint.listSteps(ckpt);
        if (files.isEmpty()) {
          System.err.println("Serve: no step checkpoint in " + ckpt);
          System.exit(1);
        }
        ckpt = files.get(0);
      }
      float[] x;
      int[] y;
      try (Tensor images = Tensor.fromIdxFile(data + "/t10k-images-idx3-ubyte.gz");
           Tensor labels = Tensor.fromIdxFile(data + "/t10k-labels-idx1-ubyte.gz")) {
        x = TrainFashionMnist.x(images);
        y = TrainFashionMnist.y(labels);
      }
      try (Model model = Model.fromFile(modelPath); NetDef def = model.buildInference(List.of("softmax"), null);
           Workspace loaded = Workspace.create()) {
        // The params, once: the net's external inputs that are not model inputs, loaded into a workspace of
        // their own (lenient creates the blobs, mmap shares the file's pages), then fetched as tensors that
        // every worker feeds.
        List<String> names = new ArrayList<>(def.externalInputs());
        names.removeAll(model.blobs(Model.INPUTS));
        Checkpoint.load(loaded, ckpt, new CheckpointLoadOptions().names(names.toArray(new String[0])).lenient(true).mmap(true));
        Map<String, Tensor> params = new LinkedHashMap<>();
        try {
          for (String n : names) params.put(n, loaded.fetch(n)); // a name the file lacks fails here
          AtomicInteger next = new AtomicInteger();
          ExecutorService pool = Executors.newFixedThreadPool(workers);
          long start = System.nanoTime();
          int correct = 0;
          try {
            List<Future<Integer>> done = new ArrayList<>();
            final int b = batch;
            for (int w = 0; w < workers; ++w) done.add(pool.submit(() -> worker(def, params, x, y, b, next)));
            for (Future<Integer> f : done) correct += f.get();
          } finally {
            pool.shutdown();
          }
          double took = (System.nanoTime() - start) * 1e-9;
          System.out.printf("served %d images in %d requests of %d from %d workers: test_acc=%.4f"
                  + " images_per_s=%.1f%n", y.length, (y.length + batch - 1) / batch, batch, workers,
              (double) correct / y.length, y.length / took);
        } finally {
          for (Tensor t : params.values()) t.close();
        }
      }
    } catch (DpException e) {
      System.err.println("Serve: [" + e.codeName() + "] " + e.getMessage());
      System.exit(1);
    }
  }
}
