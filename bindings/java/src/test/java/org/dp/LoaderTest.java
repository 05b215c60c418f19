package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The thread budget and the input pipeline: tensor and callback loaders, order, seek, errors. */
class LoaderTest {
  @Test
  void cpuThreads() {
    Dp.setCpuThreads(1);
    assertEquals(1, Dp.cpuThreads());
    Dp.setCpuThreads(0);
    assertTrue(Dp.cpuThreads() >= 1);
    assertThrows(DpInvalidArgumentException.class, () -> Dp.setCpuThreads(-1));
  }

  /** 10 samples: "data" [10, 3] whose row i holds i, "label" [10] holding i. */
  static Tensor[] dataset() {
    float[] x = new float[30];
    int[] y = new int[10];
    for (int i = 0; i < 10; ++i) {
      y[i] = i;
      Arrays.fill(x, i * 3, i * 3 + 3, i);
    }
    return new Tensor[] {Tensor.of(x, 10, 3), Tensor.of(y, 10)};
  }

  static Loader tensorLoader(Workspace ws, LoaderOptions o) {
    Tensor[] t = dataset();
    try {
      return Loader.create(ws, List.of("data", "label"), List.of(t), o);
    } finally {
      // The loader shares the tensors' memory: the handles may go at once.
      t[0].close();
      t[1].close();
    }
  }

  /** The batch in the blobs: shapes [4, 3] and [4], each data row equal to its label. */
  static List<Integer> fedBatch(Workspace ws) {
    try (Tensor x = ws.fetch("data"); Tensor y = ws.fetch("label")) {
      assertArrayEquals(new long[] {4, 3}, x.dims());
      assertArrayEquals(new long[] {4}, y.dims());
      float[] xs = x.toFloatArray();
      int[] ys = y.toIntArray();
      List<Integer> out = new ArrayList<>();
      for (int r = 0; r < 4; ++r) {
        assertTrue(ys[r] >= 0 && ys[r] < 10, "sample " + ys[r]);
        for (int k = 0; k < 3; ++k) assertEquals((float) ys[r], xs[r * 3 + k], "row " + r);
        out.add(ys[r]);
      }
      return out;
    }
  }

  /** One epoch of two batches, then its end. */
  static List<List<Integer>> epoch(Loader loader, Workspace ws) {
    List<List<Integer>> out = new ArrayList<>();
    for (int i = 0; i < 2; ++i) {
      assertTrue(loader.next(), "batch " + i + ": end of epoch");
      out.add(fedBatch(ws));
    }
    assertFalse(loader.next(), "a third batch of 4 from 10 samples (the last is dropped)");
    return out;
  }

  static void assertDistinct(List<List<Integer>> batches) {
    Set<Integer> all = new HashSet<>();
    for (List<Integer> b : batches) all.addAll(b);
    assertEquals(8, all.size(), "a sample twice in one epoch: " + batches);
  }

  @Test
  void tensorLoaderBatchesEpochsOrderAndSeek() {
    LoaderOptions o = new LoaderOptions().batchSize(4).seed(7);
    try (Workspace ws = Workspace.create(); Loader loader = tensorLoader(ws, o)) {
      assertEquals(2, loader.stepsPerEpoch());
      assertEquals(4, loader.batchRows());
      assertEquals(0, loader.epoch());
      assertEquals(0, loader.step());
      List<List<Integer>> first = epoch(loader, ws);
      assertDistinct(first);
      assertEquals(1, loader.epoch());
      assertEquals(0, loader.step());
      List<List<Integer>> second = epoch(loader, ws);
      assertDistinct(second);

      // The same seed gives the same order; seek reproduces a batch.
      try (Workspace ws2 = Workspace.create(); Loader again = tensorLoader(ws2, o)) {
        assertEquals(first, epoch(again, ws2));
        again.seek(0, 1);
        assertTrue(again.next());
        assertEquals(first.get(1), fedBatch(ws2));
        again.seek(1, 0);
        assertTrue(again.next());
        assertEquals(second.get(0), fedBatch(ws2));
        assertThrows(DpOutOfRangeException.class, () -> again.seek(0, 2));
      }
    }
    // Without shuffling the first batch is samples 0..3.
    try (Workspace ws = Workspace.create();
         Loader loader = tensorLoader(ws, new LoaderOptions().batchSize(4).noShuffle(true))) {
      assertTrue(loader.next());
      assertEquals(List.of(0, 1, 2, 3), fedBatch(ws));
      loader.close();
      assertThrows(IllegalStateException.class, loader::next);
    }
  }

  @Test
  void borrowedDataset() {
    ByteBuffer x = ByteBuffer.allocateDirect(30 * 4).order(ByteOrder.nativeOrder());
    ByteBuffer y = ByteBuffer.allocateDirect(10 * 4).order(ByteOrder.nativeOrder());
    for (int i = 0; i < 10; ++i) {
      for (int k = 0; k < 3; ++k) x.putFloat(i);
      y.putInt(i);
    }
    x.flip();
    y.flip();
    try (Workspace ws = Workspace.create()) {
      Loader loader;
      try (Tensor tx = Tensor.borrow(DType.FLOAT32, x, 10, 3); Tensor ty = Tensor.borrow(DType.INT32, y, 10)) {
        loader = Loader.create(ws, List.of("data", "label"), List.of(tx, ty), new LoaderOptions().batchSize(4));
      }
      x = null; // the loader keeps the borrowed buffers reachable
      y = null;
      System.gc();
      try (Loader l = loader) {
        assertDistinct(epoch(l, ws));
      }
    }
  }

  @Test
  void badOptionsAndDatasets() {
    Tensor[] t = dataset();
    try (Workspace ws = Workspace.create(); Tensor x = t[0]; Tensor y = t[1];
         Tensor shortLabels = Tensor.of(new int[9], 9)) {
      List<String> blobs = List.of("data", "label");
      List<Tensor> tensors = List.of(x, y);
      for (LoaderOptions o : new LoaderOptions[] {null, new LoaderOptions(), new LoaderOptions().batchSize(-4),
               new LoaderOptions().batchSize(11), new LoaderOptions().batchSize(4).timeoutMs(-1)}) {
        assertThrows(DpInvalidArgumentException.class, () -> Loader.create(ws, blobs, tensors, o));
      }
      LoaderOptions four = new LoaderOptions().batchSize(4);
      assertThrows(DpShapeException.class, () -> Loader.create(ws, blobs, List.of(x, shortLabels), four));
      assertThrows(DpInvalidArgumentException.class,
          () -> Loader.create(ws, List.of("data", "data"), tensors, four));
      assertThrows(IllegalArgumentException.class, () -> Loader.create(ws, List.of("data"), tensors, four));
      List<LoaderInput> in = List.of(new LoaderInput("data", DType.FLOAT32, 3));
      assertThrows(DpInvalidArgumentException.class,
          () -> Loader.createCallback(ws, in, 10, (i, b) -> 0, new LoaderOptions()));
      assertThrows(DpInvalidArgumentException.class, () -> Loader.createCallback(ws, in, 0, (i, b) -> 0, four));
    }
  }

  /**
   * A dataset on a GPU, or staged to one (hostDataset, callbacks): the device fields are checked;
   * without the GPU the loader is unavailable, with one it feeds the host loader's batches.
   */
  @Test
  void datasetOnAGpu() {
    Tensor[] t = dataset();
    try (Workspace ws = Workspace.create(); Tensor x = t[0]; Tensor y = t[1]) {
      List<String> blobs = List.of("data", "label");
      List<Tensor> tensors = List.of(x, y);
      LoaderOptions bad = new LoaderOptions().batchSize(4);
      bad.deviceId = 1;
      DpException e = assertThrows(DpInvalidArgumentException.class, () -> Loader.create(ws, blobs, tensors, bad));
      assertTrue(e.getMessage().contains("device_id"), e.getMessage());
      LoaderOptions hostOnly = new LoaderOptions().batchSize(4).hostDataset(true);
      e = assertThrows(DpInvalidArgumentException.class, () -> Loader.create(ws, blobs, tensors, hostOnly));
      assertTrue(e.getMessage().contains("host_dataset"), e.getMessage());
      LoaderOptions gpu = new LoaderOptions().batchSize(4).seed(3).onCuda(0);
      LoaderOptions staged = new LoaderOptions().batchSize(4).seed(3).onCuda(0).hostDataset(true);
      int gpus;
      try {
        gpus = Dp.deviceCount(Dp.DEVICE_CUDA);
      } catch (DpException none) {
        gpus = 0;
      }
      if (gpus == 0) {
        assertThrows(DpUnavailableException.class, () -> Loader.create(ws, blobs, tensors, gpu));
        assertThrows(DpUnavailableException.class, () -> Loader.create(ws, blobs, tensors, staged));
        assertThrows(DpUnavailableException.class,
            () -> Loader.createCallback(ws, List.of(new LoaderInput("data", DType.FLOAT32, 3)), 10, (i, b) -> 0, gpu));
        return;
      }
      try (Loader host = Loader.create(ws, blobs, tensors, new LoaderOptions().batchSize(4).seed(3))) {
        for (LoaderOptions o : List.of(gpu, staged)) {
          try (Loader onGpu = Loader.create(ws, blobs, tensors, o)) {
            for (int k = 0; k < 3; ++k) {
              List<List<Integer>> want = epoch(host, ws);
              assertEquals(want, epoch(onGpu, ws), "epoch " + k + ", hostDataset " + o.hostDataset);
            }
          }
        }
      }
    }
  }

  static List<LoaderInput> callbackInputs() {
    return List.of(new LoaderInput("data", DType.FLOAT32, 3), new LoaderInput("label", DType.INT32));
  }

  /** Writes sample i as data row i and label i. */
  static int writeSamples(long[] indices, ByteBuffer[] buffers) {
    if (buffers.length != 2 || buffers[0].capacity() != 12 * indices.length
        || buffers[1].capacity() != 4 * indices.length || buffers[0].order() != ByteOrder.nativeOrder()) {
      return 2;
    }
    for (int i = 0; i < indices.length; ++i) {
      for (int k = 0; k < 3; ++k) buffers[0].putFloat((i * 3 + k) * 4, indices[i]);
      buffers[1].putInt(i * 4, (int) indices[i]);
    }
    return 0;
  }

  @Test
  void callbackLoaderMatchesTheTensorOrder() {
    LoaderOptions o = new LoaderOptions().batchSize(4).seed(11);
    AtomicInteger calls = new AtomicInteger();
    Set<Thread> threads = java.util.concurrent.ConcurrentHashMap.newKeySet();
    List<List<Integer>> got;
    try (Workspace ws = Workspace.create();
         Loader loader = Loader.createCallback(ws, callbackInputs(), 10, (indices, buffers) -> {
           calls.incrementAndGet();
           threads.add(Thread.currentThread());
           return writeSamples(indices, buffers);
         }, o)) {
      assertEquals(2, loader.stepsPerEpoch());
      assertEquals(4, loader.batchRows());
      got = epoch(loader, ws);
      assertDistinct(got);
      loader.seek(0, 1);
      assertTrue(loader.next());
      assertEquals(got.get(1), fedBatch(ws));
    }
    assertTrue(calls.get() > 0);
    assertFalse(threads.contains(Thread.currentThread()), "the callback runs on the loader's thread");
    for (Thread t : threads) assertTrue(t.isDaemon(), "the loader's thread is attached as a daemon");
    // Same seed, same order as a tensor dataset.
    try (Workspace ws = Workspace.create(); Loader reference = tensorLoader(ws, o)) {
      assertEquals(got, epoch(reference, ws));
    }
  }

  @Test
  void failingCallbacksThrowInternal() {
    LoaderOptions o = new LoaderOptions().batchSize(4).timeoutMs(10000);
    try (Workspace ws = Workspace.create()) {
      try (Loader loader = Loader.createCallback(ws, callbackInputs(), 10, (i, b) -> 3, o)) {
        for (int k = 0; k < 2; ++k) { // the same error on every call
          DpInternalException e = assertThrows(DpInternalException.class, loader::next);
          assertTrue(e.getMessage().contains("returned 3"), e.getMessage());
        }
      }
      IllegalStateException boom = new IllegalStateException("boom");
      try (Loader loader = Loader.createCallback(ws, callbackInputs(), 10, (i, b) -> {
        throw boom;
      }, o)) {
        DpInternalException e = assertThrows(DpInternalException.class, loader::next);
        assertTrue(e.getMessage().contains("returned -1"), e.getMessage());
        assertSame(boom, e.getCause());
      }
    }
  }
}
