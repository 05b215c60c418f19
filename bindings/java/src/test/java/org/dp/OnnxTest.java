package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * ONNX (Model.fromOnnx, toOnnx, saveOnnx; since 0.6): a two-layer perceptron exported with the
 * params of its init net and an example batch, at the default opset and at 11, imported from the
 * bytes and from the saved file, computes the same logits and softmax, bit for bit, as the
 * original's inference net; imported with a head and an optimizer it is trainable; each error its
 * exception. A build without ONNX throws DpUnimplementedException from every call.
 */
class OnnxTest {
  private static final String MLP = "{\"name\":\"mlp\","
      + "\"init_net\":{\"ops\":["
      + "{\"type\":\"XavierFill\",\"outputs\":[\"w1\"],\"args\":[{\"name\":\"shape\",\"ints\":[8,4]},"
      + "{\"name\":\"seed\",\"i\":7}]},"
      + "{\"type\":\"ConstantFill\",\"outputs\":[\"b1\"],\"args\":[{\"name\":\"shape\",\"ints\":[8]},"
      + "{\"name\":\"value\",\"f\":0.125}]},"
      + "{\"type\":\"XavierFill\",\"outputs\":[\"w2\"],\"args\":[{\"name\":\"shape\",\"ints\":[3,8]},"
      + "{\"name\":\"seed\",\"i\":9}]},"
      + "{\"type\":\"ConstantFill\",\"outputs\":[\"b2\"],\"args\":[{\"name\":\"shape\",\"ints\":[3]},"
      + "{\"name\":\"value\",\"f\":-0.25}]}]},"
      + "\"forward_net\":{\"ops\":["
      + "{\"type\":\"FC\",\"name\":\"fc1\",\"inputs\":[\"x\",\"w1\",\"b1\"],\"outputs\":[\"h\"]},"
      + "{\"type\":\"Relu\",\"inputs\":[\"h\"],\"outputs\":[\"h\"]},"
      + "{\"type\":\"FC\",\"name\":\"fc2\",\"inputs\":[\"h\",\"w2\",\"b2\"],\"outputs\":[\"logits\"]},"
      + "{\"type\":\"SoftmaxWithLoss\",\"inputs\":[\"logits\",\"label\"],\"outputs\":[\"softmax\",\"loss\"]},"
      + "{\"type\":\"Accuracy\",\"inputs\":[\"softmax\",\"label\"],\"outputs\":[\"accuracy\"]}]},"
      + "\"params\":[\"w1\",\"b1\",\"w2\",\"b2\"],\"inputs\":[\"x\",\"label\"],\"losses\":[\"loss\"],"
      + "\"metrics\":[\"accuracy\"],\"optimizer\":{\"type\":\"momentum\",\"lr\":0.1,\"momentum\":0.9}}";

  /** An example batch of 5 samples of 4 features. */
  private static float[] example() {
    float[] x = new float[20];
    for (int k = 0; k < x.length; ++k) x[k] = (float) Math.sin(0.61 * (k + 1)) * 2;
    return x;
  }

  private static int[] bits(float[] v) {
    int[] b = new int[v.length];
    for (int i = 0; i < v.length; ++i) b[i] = Float.floatToRawIntBits(v[i]);
    return b;
  }

  /** Adam with lr, beta1, beta2 and epsilon given; every other field 0 / null: its default. */
  private static OptimizerInfo adam() {
    return new OptimizerInfo("adam", 0.01, 0, false, 0.8, 0.99, 1e-7, 0, null, 0, 0, 0, 0, 0, 0);
  }

  /**
   * Runs the model's init net, then its inference net (default outputs) on x, in a workspace of
   * its own: the outputs' names, and their values after them.
   */
  private static List<Object> infer(Model m, float[] x) {
    try (Workspace ws = Workspace.create(); NetDef initDef = m.net(Model.INIT_NET);
         Net init = Net.create(ws, initDef); NetDef def = m.buildInference(null, null);
         Net net = Net.create(ws, def)) {
      init.run();
      ws.feed("x", x, 5, 4);
      net.run();
      List<Object> out = new ArrayList<>();
      out.add(def.externalOutputs());
      for (String o : def.externalOutputs()) out.add(ws.fetchFloats(o));
      return out;
    }
  }

  @Test
  void roundTripHeadAndErrors() throws Exception {
    BuildInfo info = Dp.buildInfo();
    assertEquals(info.onnx, !info.onnxVersion.isEmpty(), "onnx " + info.onnx + ", version " + info.onnxVersion);
    Path dir = TestSupport.tempDir("onnx");
    String path = dir.resolve("mlp.onnx").toString();
    try (Model m = Model.fromJson(MLP); Workspace ws = Workspace.create()) {
      if (!info.onnx) {
        assertThrows(DpUnimplementedException.class, () -> Model.fromOnnx(new byte[16], null));
        assertThrows(DpUnimplementedException.class, () -> Model.fromOnnxFile(path, new OnnxImportOptions()));
        assertThrows(DpUnimplementedException.class, () -> m.toOnnx(ws, null));
        assertThrows(DpUnimplementedException.class, () -> m.saveOnnx(ws, path, new OnnxExportOptions()));
        return;
      }
      try (NetDef initDef = m.net(Model.INIT_NET); Net init = Net.create(ws, initDef)) {
        init.run();
      }
      // No example batch yet: the input is not found.
      assertThrows(DpNotFoundException.class, () -> m.toOnnx(ws, null));

      float[] x = example();
      ws.feed("x", x, 5, 4);
      List<String> outputs;
      try (NetDef ref = m.buildInference(null, null); Net net = Net.create(ws, ref)) {
        net.run();
        outputs = ref.externalOutputs();
      }
      assertEquals(Arrays.asList("logits", "softmax"), outputs);

      for (int opset : new int[] {0, 11}) {
        OnnxExportOptions opts = opset == 0 ? null : new OnnxExportOptions().opset(opset);
        byte[] bytes = m.toOnnx(ws, opts);
        assertTrue(bytes.length > 100, "opset " + opset + ": " + bytes.length + " bytes");
        m.saveOnnx(ws, path, opts);
        assertArrayEquals(bytes, Files.readAllBytes(Path.of(path)), "opset " + opset + ": the file differs");
        try (Model fromBytes = Model.fromOnnx(bytes, null);
             Model fromFile = Model.fromOnnxFile(path, new OnnxImportOptions())) {
          for (Model im : new Model[] {fromBytes, fromFile}) {
            assertEquals(Arrays.asList("w1", "b1", "w2", "b2"), im.blobs(Model.PARAMS));
            assertEquals(Arrays.asList("x"), im.blobs(Model.INPUTS));
            assertEquals(Arrays.asList(), im.blobs(Model.LOSSES));
            assertFalse(im.hasOptimizer());
            assertThrows(DpNotFoundException.class, im::optimizer);
            List<Object> got = infer(im, x);
            assertEquals(outputs, got.get(0), "opset " + opset);
            for (int i = 0; i < outputs.size(); ++i) {
              assertArrayEquals(bits(ws.fetchFloats(outputs.get(i))), bits((float[]) got.get(i + 1)),
                  "opset " + opset + ": imported " + outputs.get(i) + " differs");
            }
          }
        }
      }

      // The logits alone, imported with the softmax cross-entropy head and Adam: trainable, the
      // optimizer as given.
      byte[] logits = m.toOnnx(ws, new OnnxExportOptions().outputs("logits"));
      OnnxImportOptions head =
          new OnnxImportOptions().head(OnnxImportOptions.HEAD_SOFTMAX_CROSS_ENTROPY).optimizer(adam());
      try (Model t = Model.fromOnnx(logits, head)) {
        assertEquals(Arrays.asList("loss"), t.blobs(Model.LOSSES));
        assertEquals(Arrays.asList("accuracy"), t.blobs(Model.METRICS));
        assertEquals(Arrays.asList("x", "label"), t.blobs(Model.INPUTS));
        OptimizerInfo back = t.optimizer();
        assertEquals("adam", back.type);
        assertEquals(0.01, back.lr);
        assertEquals(0.8, back.beta1);
        assertEquals(0.99, back.beta2);
        assertEquals(1e-7, back.epsilon);
        assertEquals("fixed", back.lrPolicy);
        assertEquals(0.9, back.momentum); // a zero: the model format's default
        t.buildTraining(null).close();
      }
      try (Model named = Model.fromOnnx(logits,
               new OnnxImportOptions().head(OnnxImportOptions.HEAD_SOFTMAX_CROSS_ENTROPY).labels("y"))) {
        assertEquals(Arrays.asList("x", "y"), named.blobs(Model.INPUTS));
      }

      // Errors, each of its exception.
      assertThrows(DpParseException.class, () -> Model.fromOnnx("0123456789abcdef".getBytes("UTF-8"), null));
      assertThrows(DpParseException.class, () -> Model.fromOnnx(new byte[0], null));
      assertThrows(DpNotFoundException.class,
          () -> Model.fromOnnxFile(dir.resolve("none.onnx").toString(), null));
      assertThrows(DpInvalidArgumentException.class, () -> Model.fromOnnx(logits,
          new OnnxImportOptions().head(OnnxImportOptions.HEAD_SOFTMAX_CROSS_ENTROPY).labels("x")));
      assertThrows(DpInvalidArgumentException.class,
          () -> Model.fromOnnx(logits, new OnnxImportOptions().head(7)));
      assertThrows(DpInvalidArgumentException.class,
          () -> Model.fromOnnx(logits, new OnnxImportOptions().labels("a\u0000b")));
      assertThrows(DpInvalidArgumentException.class, () -> m.toOnnx(ws, new OnnxExportOptions().opset(10)));
      assertThrows(DpNotFoundException.class, () -> m.toOnnx(ws, new OnnxExportOptions().paramPrefix("cpu_0/")));
      assertThrows(DpNotFoundException.class, () -> m.toOnnx(ws, new OnnxExportOptions().outputs("q")));
      assertThrows(DpInvalidArgumentException.class, () -> m.toOnnx(null, null));
      String unwritable = dir.resolve("no_such_dir").resolve("m.onnx").toString();
      assertThrows(DpIoException.class, () -> m.saveOnnx(ws, unwritable, null));
      assertFalse(Files.exists(dir.resolve("no_such_dir")));
    } finally {
      TestSupport.deleteTree(dir);
    }
  }
}
