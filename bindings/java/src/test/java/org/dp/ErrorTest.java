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
