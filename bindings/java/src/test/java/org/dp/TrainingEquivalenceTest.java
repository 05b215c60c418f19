package org.dp;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The C sample trains the MLP for one epoch on the first 640 images and writes a checkpoint; the
 * same training through the Java binding (batches from a {@link Loader} with the same seed, as the
 * sample takes them) must end with the same parameters and optimizer state.
 */
class TrainingEquivalenceTest {
  static final String DATA = "/usr/share/datasets/fashion-mnist";
  static final int LIMIT = 640, BATCH = 64;

  @Test
  void javaTrainingMatchesTheCSample() throws Exception {
    Path sample = TestSupport.buildRoot().resolve("samples/train_fashion_mnist");
    assumeTrue(Files.isExecutable(sample), "no C sample at " + sample);
    assumeTrue(Files.exists(Path.of(DATA, "train-images-idx3-ubyte.gz")), "no Fashion-MNIST data");
    Path dir = TestSupport.tempDir("equiv");
    try {
      Path cdir = Files.createDirectories(dir.resolve("c"));
      ProcessBuilder pb = new ProcessBuilder(sample.toString(), "--limit", "" + LIMIT, "--epochs", "1", "--seed", "3",
          "--checkpoint", cdir.toString(), "--nets", TestSupport.sourceRoot().resolve("samples/nets").toString())
          .redirectErrorStream(true).redirectOutput(dir.resolve("c.log").toFile());
      // One process, whatever dp-run's variables say (the sample reads them).
      for (String v : new String[] {"DP_WORLD_SIZE", "DP_RANK", "DP_STORE", "DP_TIMEOUT_MS", "DP_INTERFACE", "DP_RUN_ID"}) {
        pb.environment().remove(v);
      }
      Process p = pb.start();
      assertTrue(p.waitFor(300, TimeUnit.SECONDS), "the C sample did not finish in time");
      assertEquals(0, p.exitValue(), Files.readString(dir.resolve("c.log")));
      List<String> cfiles = Checkpoint.listSteps(cdir.toString());
      assertEquals(1, cfiles.size());

      FashionData train = FashionData.load(DATA, "train");
      int n = LIMIT, steps = n / BATCH;
      Tensor[] set = train.tensors(n);
      String model = TestSupport.sourceRoot().resolve("samples/nets/fashion_mlp.json").toString();
      try (Model m = Model.fromFile(model); TrainingNets defs = m.buildTraining(new TrainingOptions());
           Workspace ws = Workspace.create(); Net init = Net.create(ws, defs.init);
           Net trainNet = Net.create(ws, defs.train); Workspace c = Workspace.create();
           Loader loader = Loader.create(ws, List.of("data", "label"), List.of(set),
               new LoaderOptions().batchSize(BATCH).seed(3))) {
        set[0].close();
        set[1].close();
        init.run();
        int done = 0;
        while (loader.next()) {
          trainNet.run();
          ++done;
        }
        assertEquals(steps, done);
        Checkpoint.load(c, cfiles.get(0), new CheckpointLoadOptions().lenient(true));
        try (CheckpointInfo info = CheckpointInfo.fromFile(cfiles.get(0))) {
          assertEquals(steps, info.iteration());
        }
        List<String> blobs = m.checkpointBlobs();
        assertEquals(blobs.size(), c.listBlobs().size());
        for (String b : blobs) {
          try (Tensor mine = ws.fetch(b); Tensor theirs = c.fetch(b)) {
            assertArrayEquals(theirs.dims(), mine.dims(), b);
            if (mine.dtype() == DType.FLOAT32) {
              float[] a = mine.toFloatArray(), e = theirs.toFloatArray();
              for (int i = 0; i < a.length; ++i) {
                assertEquals(e[i], a[i], 1e-5f + 1e-4f * Math.abs(e[i]), b + "[" + i + "]");
              }
            } else {
              assertArrayEquals(theirs.toByteArray(), mine.toByteArray(), b);
            }
          }
        }
      }
    } finally {
      TestSupport.deleteTree(dir);
    }
  }
}
