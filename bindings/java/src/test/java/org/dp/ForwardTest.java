package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Forward runs checked against the FC/ReLU math computed here in Java, and the tensor paths. */
class ForwardTest {
  static final float[] X = {1f, -2f, 0.5f, 3f, 0.25f, -1f};
  static final float[] W = {0.5f, 0.1f, -0.3f, -1f, 0.2f, 0.7f};
  static final float[] B = {0.05f, -0.2f};

  /** relu(x W^T + b) in double precision. */
  static float[] reference() {
    float[] y = new float[4];
    for (int n = 0; n < 2; ++n) {
      for (int o = 0; o < 2; ++o) {
        double acc = B[o];
        for (int k = 0; k < 3; ++k) acc += (double) X[n * 3 + k] * W[o * 3 + k];
        y[n * 2 + o] = (float) Math.max(0, acc);
      }
    }
    return y;
  }

  @Test
  void fcReluMatchesJavaReference() {
    try (NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET); Workspace ws = Workspace.create();
         Net net = Net.create(ws, def)) {
      ws.feed("x", X, 2, 3);
      ws.feed("w", W, 2, 3);
      ws.feed("b", B, 2);
      net.run();
      try (Tensor y = ws.fetch("y")) {
        assertEquals(DType.FLOAT32, y.dtype());
        assertArrayEquals(new long[] {2, 2}, y.dims());
        assertEquals(2, y.ndim());
        assertEquals(4, y.numel());
        assertEquals(16, y.nbytes());
        assertArrayEquals(reference(), y.toFloatArray(), 1e-6f);
        // The zero-copy view and a copy into a direct buffer agree.
        assertEquals(reference()[0], y.data().getFloat(0), 1e-6f);
        ByteBuffer out = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
        y.copyTo(out);
        assertEquals(reference()[3], out.getFloat(12), 1e-6f);
      }
    }
  }

  @Test
  void directBuffersCopiedWrappedAndBorrowed() {
    long before = Tensor.liveWrappedBuffers();
    try (NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET); Workspace ws = Workspace.create();
         Net net = Net.create(ws, def)) {
      ByteBuffer x = ByteBuffer.allocateDirect(24).order(ByteOrder.nativeOrder());
      x.asFloatBuffer().put(X);
      ByteBuffer w = ByteBuffer.allocateDirect(24).order(ByteOrder.nativeOrder());
      w.asFloatBuffer().put(W);
      ByteBuffer b = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
      b.asFloatBuffer().put(B);
      try (Tensor tx = Tensor.wrap(DType.FLOAT32, x, 2, 3); Tensor tw = Tensor.borrow(DType.FLOAT32, w, 2, 3);
           Tensor tb = Tensor.copyOf(DType.FLOAT32, b, 2)) {
        assertEquals(before + 1, Tensor.liveWrappedBuffers());
        ws.feed("x", tx);
        ws.feed("w", tw);
        ws.feed("b", tb);
      }
      // The workspace still holds x through dp's reference: the buffer stays alive.
      assertEquals(before + 1, Tensor.liveWrappedBuffers());
      net.run();
      assertArrayEquals(reference(), ws.fetchFloats("y"), 1e-6f);
      ws.feed("x", X, 2, 3); // replaces the blob: dp lets the wrapped buffer go
      assertEquals(before, Tensor.liveWrappedBuffers());
    }
  }

  @Test
  void arrayTensorsOfEveryJavaType() {
    try (Tensor d = Tensor.of(new double[] {1.5, 2.5}, 2); Tensor i = Tensor.of(new int[] {1, 2, 3}, 3);
         Tensor l = Tensor.of(new long[] {7L, 8L}, 2, 1); Tensor z = Tensor.of(new boolean[] {true, false}, 2);
         Tensor u = Tensor.of(DType.UINT8, new byte[] {(byte) 200, 3}, 2);
         Tensor zeros = Tensor.zeros(DType.FLOAT32, 3); Tensor scalar = Tensor.of(new float[] {4f})) {
      assertArrayEquals(new double[] {1.5, 2.5}, d.toDoubleArray());
      assertArrayEquals(new int[] {1, 2, 3}, i.toIntArray());
      assertArrayEquals(new long[] {7L, 8L}, l.toLongArray());
      assertArrayEquals(new byte[] {1, 0}, z.toByteArray());
      assertEquals(DType.BOOL, z.dtype());
      assertArrayEquals(new byte[] {(byte) 200, 3}, u.toByteArray());
      assertArrayEquals(new float[3], zeros.toFloatArray());
      assertEquals(0, scalar.ndim());
      assertEquals(1, scalar.numel());
      assertEquals(4, DType.FLOAT32.size());
      assertEquals(2, DType.BFLOAT16.size());
      assertThrows(DpDtypeException.class, i::toFloatArray);
    }
  }

  @Test
  void netDefIntrospectionAndRoundTrips() {
    String json = "{\"name\":\"intro\",\"external_inputs\":[\"x\"],\"external_outputs\":[\"y\"],\"ops\":["
        + "{\"type\":\"ConstantFill\",\"name\":\"c\",\"outputs\":[\"k\"],\"args\":["
        + "{\"name\":\"shape\",\"ints\":[2,3]},{\"name\":\"value\",\"f\":1.5}]},"
        + "{\"type\":\"Add\",\"name\":\"add\",\"inputs\":[\"x\",\"k\"],\"outputs\":[\"y\"]}]}";
    try (NetDef def = NetDef.fromJson(json)) {
      assertEquals("intro", def.name());
      assertEquals(2, def.numOps());
      assertEquals(List.of("x"), def.externalInputs());
      assertEquals(List.of("y"), def.externalOutputs());
      assertEquals(Dp.DEVICE_CPU, def.deviceType());
      assertEquals(0, def.deviceId());
      assertEquals(0, def.executor());
      assertEquals(0, def.numWorkers());
      OpDef fill = def.op(0);
      assertEquals("ConstantFill", fill.type());
      assertEquals("c", fill.name());
      assertEquals("", fill.engine());
      assertEquals(List.of(), fill.inputs());
      assertEquals(List.of("k"), fill.outputs());
      assertEquals(List.of(), fill.controlInputs());
      assertEquals(Dp.DEVICE_NONE, fill.deviceType());
      assertEquals(Dp.DEVICE_NONE, fill.deviceId());
      assertEquals(2, fill.numArgs());
      ArgDef shape = fill.findArg("shape");
      assertEquals("shape", shape.name());
      assertEquals(ArgDef.INTS, shape.kind());
      assertEquals(2, shape.numValues());
      assertArrayEquals(new long[] {2, 3}, shape.getInts());
      assertEquals(1.5, fill.arg(1).getFloat());
      assertNull(fill.findArg("nope"));
      assertThrows(DpInvalidArgumentException.class, shape::getFloat);
      assertThrows(IndexOutOfBoundsException.class, () -> def.op(5));
      assertEquals(List.of("x", "k"), def.ops().get(1).inputs());
      assertTrue(def.toDot().contains("Add"));
      try (NetDef again = NetDef.fromBuffer(def.toBuffer()); NetDef fromJson = NetDef.fromJson(def.toJson())) {
        assertEquals(2, again.numOps());
        assertEquals("Add", fromJson.op(1).type());
      }
      def.close();
      assertThrows(IllegalStateException.class, fill::type);
    }
  }

  @Test
  void gradientsOfTheFcNet() {
    try (NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET);
         Gradients g = def.addGradients(new GradientOptions().losses("y").wrt("w", "b"))) {
      assertEquals("w_grad", g.gradientOf.get("w"));
      assertTrue(g.netDef.numOps() > def.numOps());
      try (Workspace ws = Workspace.create(); Net net = Net.create(ws, g.netDef)) {
        ws.feed("x", X, 2, 3);
        ws.feed("w", W, 2, 3);
        ws.feed("b", B, 2);
        net.run();
        // d(sum y)/db_o = number of rows where unit o is active.
        float[] ref = reference();
        float[] db = ws.fetchFloats("b_grad");
        for (int o = 0; o < 2; ++o) {
          int active = (ref[o] > 0 ? 1 : 0) + (ref[2 + o] > 0 ? 1 : 0);
          assertEquals(active, db[o], 1e-6f);
        }
      }
    }
  }

  @Test
  void asyncRunsTracesAndDot() {
    try (NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET); Workspace ws = Workspace.create();
         Net net = Net.create(ws, def, new NetOptions().executor(NetOptions.EXECUTOR_ASYNC).numWorkers(2)
             .profile(true))) {
      ws.feed("x", X, 2, 3);
      ws.feed("w", W, 2, 3);
      ws.feed("b", B, 2);
      net.runAsync();
      assertTrue(net.await(60_000));
      assertArrayEquals(reference(), ws.fetchFloats("y"), 1e-6f);
      assertTrue(net.traceJson().contains("traceEvents"));
      assertTrue(net.toDot().contains("digraph"));
      assertThrows(DpFailedPreconditionException.class, () -> net.await(0));
      net.cancel(); // nothing runs: a no-op
      assertTrue(ws.hasBlob("y"));
      assertFalse(ws.hasBlob("nothing"));
      assertEquals(Arrays.asList("b", "h", "w", "x", "y"), ws.listBlobs());
      assertSame(ws, net.workspace());
    }
  }

  @Test
  void libraryQueries() {
    assertEquals(Dp.BINDING_VERSION_NUMBER, Dp.versionNumber());
    assertEquals("0.6.0", Dp.version());
    assertEquals("NOT_FOUND", Dp.statusCodeName(DpException.NOT_FOUND));
    assertEquals("UNKNOWN", Dp.statusCodeName(999));
    assertEquals(1, Dp.deviceCount(Dp.DEVICE_CPU));
    BuildInfo info = Dp.buildInfo();
    assertEquals(Dp.version(), info.version);
    assertFalse(info.blas.isEmpty());
    if (!info.cuda) assertEquals(0, Dp.deviceCount(Dp.DEVICE_CUDA));
    // Why there are CUDA devices or not, in every build.
    assertEquals(Dp.deviceCount(Dp.DEVICE_CUDA) > 0, info.cudaState == BuildInfo.CUDA_STATE_AVAILABLE);
    assertFalse(info.cudaStateDetail.isEmpty());
    if (info.cuda) {
      assertNotEquals(BuildInfo.CUDA_STATE_NOT_BUILT, info.cudaState);
      assertFalse(info.cudaModule.isEmpty());
    } else {
      assertEquals(BuildInfo.CUDA_STATE_NOT_BUILT, info.cudaState);
      assertEquals("", info.cudaModule);
      assertEquals("built without CUDA", info.cudaStateDetail);
    }
  }

  @Test
  void deviceMemoryStatistics() {
    Dp.resetPeakMemory(Dp.DEVICE_CPU, 0);
    MemoryStats before = Dp.deviceMemoryStats(Dp.DEVICE_CPU, 0);
    assertEquals(before.allocated, before.reserved);
    assertEquals(before.allocated, before.peak);
    MemoryStats during;
    try (Tensor x = Tensor.of(new float[1000], 1000)) {
      during = Dp.deviceMemoryStats(Dp.DEVICE_CPU, 0);
    }
    MemoryStats after = Dp.deviceMemoryStats(Dp.DEVICE_CPU, 0);
    assertTrue(during.allocated >= before.allocated + 4000 && during.rawAllocs > before.rawAllocs,
        before + " " + during);
    assertTrue(after.peak >= before.allocated + 4000 && after.rawFrees > before.rawFrees, before + " " + after);
    DpException e = assertThrows(DpInvalidArgumentException.class, () -> Dp.deviceMemoryStats(42, 0));
    assertTrue(e.getMessage().contains("device_type"), e.getMessage());
    assertThrows(DpInvalidArgumentException.class, () -> Dp.deviceMemoryStats(Dp.DEVICE_CPU, -1));
    int n = Dp.deviceCount(Dp.DEVICE_CUDA);
    e = assertThrows(DpUnavailableException.class, () -> Dp.deviceMemoryStats(Dp.DEVICE_CUDA, n));
    assertTrue(e.getMessage().contains("cuda:" + n), e.getMessage());
    assertThrows(DpUnavailableException.class, () -> Dp.resetPeakMemory(Dp.DEVICE_CUDA, n));
  }
}
