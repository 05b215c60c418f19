package org.dp;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Comparator;
import java.util.stream.Stream;

/** Paths and small nets shared by the tests. */
final class TestSupport {
  private TestSupport() {}

  /** The repository root (test.sh passes -Ddp.source.root). */
  static Path sourceRoot() {
    return Paths.get(System.getProperty("dp.source.root", "../.."));
  }

  /** The build directory (test.sh passes -Ddp.build.root). */
  static Path buildRoot() {
    return Paths.get(System.getProperty("dp.build.root", sourceRoot().resolve("build-cpu").toString()));
  }

  static Path tempDir(String prefix) throws IOException {
    Path base = buildRoot().resolve("bindings/java/test-tmp");
    Files.createDirectories(base);
    return Files.createTempDirectory(base, prefix);
  }

  static void deleteTree(Path dir) throws IOException {
    if (dir == null || !Files.exists(dir)) return;
    try (Stream<Path> s = Files.walk(dir)) {
      s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  /** y = relu(x W^T + b): x [2,3], W [2,3], b [2]. */
  static final String FC_RELU_NET = "{\"name\":\"fc_relu\",\"external_inputs\":[\"x\",\"w\",\"b\"],"
      + "\"external_outputs\":[\"y\"],\"ops\":["
      + "{\"type\":\"FC\",\"name\":\"fc\",\"inputs\":[\"x\",\"w\",\"b\"],\"outputs\":[\"h\"]},"
      + "{\"type\":\"Relu\",\"name\":\"relu\",\"inputs\":[\"h\"],\"outputs\":[\"y\"]}]}";

  /** A tiny classifier with SGD: data [N,4] -> 3 classes. */
  static final String TINY_MODEL = "{\"name\":\"tiny\","
      + "\"init_net\":{\"name\":\"tiny_init\",\"ops\":["
      + "{\"type\":\"XavierFill\",\"outputs\":[\"w\"],\"args\":[{\"name\":\"shape\",\"ints\":[3,4]},"
      + "{\"name\":\"seed\",\"i\":7}]},"
      + "{\"type\":\"ConstantFill\",\"outputs\":[\"b\"],\"args\":[{\"name\":\"shape\",\"ints\":[3]}]}]},"
      + "\"forward_net\":{\"name\":\"tiny_forward\",\"ops\":["
      + "{\"type\":\"FC\",\"name\":\"fc\",\"inputs\":[\"data\",\"w\",\"b\"],\"outputs\":[\"logits\"]},"
      + "{\"type\":\"SoftmaxWithLoss\",\"inputs\":[\"logits\",\"label\"],\"outputs\":[\"softmax\",\"loss\"]},"
      + "{\"type\":\"Accuracy\",\"inputs\":[\"softmax\",\"label\"],\"outputs\":[\"accuracy\"]}]},"
      + "\"params\":[\"w\",\"b\"],\"inputs\":[\"data\",\"label\"],\"losses\":[\"loss\"],"
      + "\"metrics\":[\"accuracy\"],"
      + "\"optimizer\":{\"type\":\"momentum\",\"lr\":0.1,\"momentum\":0.9}}";

  /** Deterministic batch i of the tiny model: 8 rows of 4 features, labels 0..2. */
  static float[] tinyData(int i) {
    float[] x = new float[32];
    for (int k = 0; k < x.length; ++k) x[k] = (float) Math.sin(0.37 * (k + 1) + 1.3 * i);
    return x;
  }

  static int[] tinyLabels(int i) {
    int[] y = new int[8];
    for (int k = 0; k < y.length; ++k) y[k] = (k + i) % 3;
    return y;
  }

  /** Trains the tiny model for steps in a workspace of its own; returns w then b. */
  static float[][] trainTiny(Model model, int steps) {
    try (TrainingNets defs = model.buildTraining(null); Workspace ws = Workspace.create();
         Net init = Net.create(ws, defs.init); Net train = Net.create(ws, defs.train)) {
      init.run();
      for (int s = 0; s < steps; ++s) {
        ws.feed("data", tinyData(s), 8, 4);
        ws.feed("label", tinyLabels(s), 8);
        train.run();
      }
      return new float[][] {ws.fetchFloats("w"), ws.fetchFloats("b")};
    }
  }
}
