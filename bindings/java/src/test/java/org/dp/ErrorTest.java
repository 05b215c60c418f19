package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** Bad inputs become Java exceptions with dp's stable codes, never a crash. */
class ErrorTest {
  private static <T extends Throwable> T expect(Class<T> type, int code, org.junit.jupiter.api.function.Executable e) {
    T t = assertThrows(type, e);
    if (t instanceof DpException) {
      assertEquals(code, ((DpException) t).code());
      assertFalse(t.getMessage().isEmpty());
    }
    return t;
  }

  @Test
  void badJson() {
    DpException e = expect(DpParseException.class, DpException.PARSE, () -> NetDef.fromJson("{not json"));
    assertEquals("PARSE", e.codeName());
  }

  @Test
  void unknownOp() {
    DpException e = expect(DpInvalidNetException.class, DpException.INVALID_NET, () -> NetDef.fromJson(
        "{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"NoSuchOp\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}"));
    assertTrue(e.getMessage().contains("NoSuchOp"), e.getMessage());
  }

  @Test
  void wrongDtypeFed() {
    try (NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET); Workspace ws = Workspace.create();
         Net net = Net.create(ws, def)) {
      ws.feed("x", new int[] {1, 2, 3, 4, 5, 6}, 2, 3);
      ws.feed("w", ForwardTest.W, 2, 3);
      ws.feed("b", ForwardTest.B, 2);
      expect(DpDtypeException.class, DpException.DTYPE, net::run);
      // The net stays usable after an error.
      ws.feed("x", ForwardTest.X, 2, 3);
      net.run();
    }
  }

  @Test
  void missingInputAndBlob() {
    try (NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET); Workspace ws = Workspace.create();
         Net net = Net.create(ws, def)) {
      expect(DpNotFoundException.class, DpException.NOT_FOUND, net::run);
      expect(DpNotFoundException.class, DpException.NOT_FOUND, () -> ws.fetch("nope"));
    }
  }

  @Test
  void nullArguments() {
    try (Workspace ws = Workspace.create(); Tensor t = Tensor.of(new float[] {1f}, 1)) {
      expect(DpInvalidArgumentException.class, DpException.INVALID_ARGUMENT, () -> ws.feed(null, t));
      expect(DpInvalidArgumentException.class, DpException.INVALID_ARGUMENT, () -> ws.feed("x", (Tensor) null));
      expect(DpInvalidArgumentException.class, DpException.INVALID_ARGUMENT, () -> Net.create(ws, null));
      expect(DpInvalidArgumentException.class, DpException.INVALID_ARGUMENT, () -> NetDef.fromFile(null));
      expect(DpInvalidArgumentException.class, DpException.INVALID_ARGUMENT, () -> Model.fromFile(null));
      assertThrows(NullPointerException.class, () -> Tensor.wrap(DType.FLOAT32, null, 1));
    }
  }

  /**
   * C reads a string up to its first NUL: "w1\u0000x" would reach dp as "w1" (and overwrite it), a
   * path as another file. Every name and path holding U+0000 is refused, naming the argument, and
   * nothing is touched.
   */
  @Test
  void nulInNamesAndPathsIsRefused() throws Exception {
    Path dir = TestSupport.tempDir("nul");
    String ckpt = dir.resolve("c.dpckpt").toString();
    try (Workspace ws = Workspace.create(); Tensor x = Tensor.of(new float[] {-1f}, 1);
         NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET);
         Model model = Model.fromJson(TestSupport.TINY_MODEL);
         ParallelModel pm = model.parallelize(null)) {
      ws.feed("w1", new float[] {7f}, 1);
      Checkpoint.save(ws, null, ckpt, null);
      java.util.Map<String, org.junit.jupiter.api.function.Executable> calls = new java.util.LinkedHashMap<>();
      calls.put("Workspace.feed: blob name", () -> ws.feed("w1\u0000x", x));
      calls.put("Workspace.fetch: blob name", () -> ws.fetch("w1\u0000x"));
      calls.put("Workspace.hasBlob: blob name", () -> ws.hasBlob("w1\u0000"));
      calls.put("Workspace.listBlobs: prefix", () -> ws.listBlobs("w\u0000"));
      calls.put("NetDef.fromFile: path", () -> NetDef.fromFile(ckpt + "\u0000.json"));
      calls.put("Model.fromFile: path", () -> Model.fromFile(ckpt + "\u0000.json"));
      calls.put("Tensor.fromIdxFile: path", () -> Tensor.fromIdxFile(ckpt + "\u0000"));
      calls.put("Checkpoint.save: blob name", () -> Checkpoint.save(ws, java.util.List.of("w1\u0000x"), ckpt, null));
      calls.put("Checkpoint.save: path", () -> Checkpoint.save(ws, null, ckpt + "\u0000.tmp", null));
      calls.put("Checkpoint.save: modelName",
          () -> Checkpoint.save(ws, null, ckpt, new CheckpointSaveOptions().modelName("m\u0000")));
      calls.put("Checkpoint.saveAsync: path", () -> Checkpoint.saveAsync(ws, null, ckpt + "\u0000", null));
      calls.put("Checkpoint.load: path", () -> Checkpoint.load(ws, ckpt + "\u0000", null));
      calls.put("Checkpoint.load: names",
          () -> Checkpoint.load(ws, ckpt, new CheckpointLoadOptions().names("w1\u0000x")));
      calls.put("CheckpointInfo.fromFile: path", () -> CheckpointInfo.fromFile(ckpt + "\u0000"));
      calls.put("Checkpoint.listSteps: dir", () -> Checkpoint.listSteps(dir + "\u0000/x"));
      calls.put("Checkpoint.prune: dir", () -> Checkpoint.prune(dir + "\u0000/x", 1));
      calls.put("ParallelModel.save: path", () -> pm.save(ws, ckpt + "\u0000", null));
      calls.put("ParallelModel.load: path", () -> pm.load(ws, ckpt + "\u0000", null));
      calls.put("NetDef.addGradients: losses", () -> def.addGradients(new GradientOptions().losses("y\u0000")));
      calls.put("Model.parallelize: ParallelOptions.runId", () -> {
        ParallelOptions o = ParallelOptions.cpu(1);
        o.runId = "a\u0000b";
        model.parallelize(o);
      });
      calls.put("Loader.create: blob name",
          () -> Loader.create(ws, java.util.List.of("w1\u0000x"), java.util.List.of(x), null));
      for (java.util.Map.Entry<String, org.junit.jupiter.api.function.Executable> c : calls.entrySet()) {
        DpException e = expect(DpInvalidArgumentException.class, DpException.INVALID_ARGUMENT, c.getValue());
        assertTrue(e.getMessage().startsWith("[INVALID_ARGUMENT] " + c.getKey() + " contains a NUL byte"),
            c.getKey() + ": " + e.getMessage());
      }
      assertArrayEquals(new float[] {7f}, ws.fetch("w1").toFloatArray());
      try (java.util.stream.Stream<Path> files = Files.list(dir)) {
        assertEquals(1, files.count(), "only the checkpoint saved first");
      }
      try (NetDef scale = NetDef.fromJson("{\"external_inputs\":[\"a\"],\"ops\":[{\"type\":\"Scale\","
          + "\"inputs\":[\"a\"],\"outputs\":[\"b\"],\"args\":[{\"name\":\"scale\",\"f\":2}]}]}")) {
        assertNotNull(scale.op(0).findArg("scale"));
        assertNull(scale.op(0).findArg("scale\u0000x"), "found the argument the name was cut to");
      }
    } finally {
      TestSupport.deleteTree(dir);
    }
  }

  @Test
  void closedHandleUse() {
    Workspace ws = Workspace.create();
    ws.close();
    ws.close(); // idempotent
    assertTrue(ws.isClosed());
    assertThrows(IllegalStateException.class, () -> ws.fetch("x"));
    assertThrows(IllegalStateException.class, () -> ws.feed("x", new float[] {1f}, 1));
    Tensor t = Tensor.of(new float[] {1f}, 1);
    t.close();
    assertThrows(IllegalStateException.class, t::toFloatArray);
    try (Workspace ws2 = Workspace.create()) {
      assertThrows(IllegalStateException.class, () -> ws2.feed("x", t));
      NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET);
      def.close();
      assertThrows(IllegalStateException.class, () -> Net.create(ws2, def));
    }
  }

  @Test
  void sizeMismatchAndBadBuffers() {
    expect(DpShapeException.class, DpException.SHAPE, () -> Tensor.of(new float[] {1f, 2f, 3f}, 2, 2));
    assertThrows(IllegalArgumentException.class, () -> Tensor.wrap(DType.FLOAT32, ByteBuffer.allocate(8), 2));
  }

  @Test
  void filesThatAreMissingOrNotCheckpoints() throws Exception {
    DpException e = assertThrows(DpException.class, () -> NetDef.fromFile("/nonexistent/net.json"));
    assertTrue(e instanceof DpNotFoundException || e instanceof DpIoException, e.toString());
    Path dir = TestSupport.tempDir("err");
    try {
      Path junk = dir.resolve("junk.dpckpt");
      Files.write(junk, new byte[] {1, 2, 3, 4, 5, 6, 7, 8});
      DpException c = assertThrows(DpException.class, () -> CheckpointInfo.fromFile(junk.toString()));
      assertTrue(c instanceof DpParseException || c instanceof DpDataLossException, c.toString());
      try (Workspace ws = Workspace.create()) {
        assertThrows(DpException.class, () -> Checkpoint.load(ws, junk.toString(), null));
      }
    } finally {
      TestSupport.deleteTree(dir);
    }
  }

  @Test
  void badOptionsAndLimits() {
    expect(DpInvalidArgumentException.class, DpException.INVALID_ARGUMENT, () -> Dp.deviceCount(42));
    try (Workspace ws = Workspace.create(new WorkspaceOptions().maxBytes(64));
         NetDef def = NetDef.fromJson("{\"ops\":[{\"type\":\"ConstantFill\",\"outputs\":[\"big\"],"
             + "\"args\":[{\"name\":\"shape\",\"ints\":[1000]}]}]}");
         Net net = Net.create(ws, def)) {
      expect(DpOutOfMemoryException.class, DpException.OUT_OF_MEMORY, net::run);
    }
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL)) {
      expect(DpInvalidArgumentException.class, DpException.INVALID_ARGUMENT, () -> m.net(7));
      ParallelOptions o = new ParallelOptions();
      o.deviceIds = new int[] {0, 0};
      o.numShards = 1;
      expect(DpInvalidArgumentException.class, DpException.INVALID_ARGUMENT, () -> m.parallelize(o));
      expect(DpFailedPreconditionException.class, DpException.FAILED_PRECONDITION, () -> {
        try (ParallelModel pm = m.parallelize(new ParallelOptions().shards(1, 0))) {
          pm.accumulateNet();
        }
      });
    }
    expect(DpInvalidArgumentException.class, DpException.INVALID_ARGUMENT, () -> Checkpoint.prune(".", -1));
  }
}
