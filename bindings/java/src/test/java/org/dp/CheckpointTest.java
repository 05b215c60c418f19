package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Checkpoint save/load/async/info/list/prune round trips. */
class CheckpointTest {
  private Path dir;

  @BeforeEach
  void setUp() throws Exception {
    dir = TestSupport.tempDir("ckpt");
  }

  @AfterEach
  void tearDown() throws Exception {
    TestSupport.deleteTree(dir);
  }

  @Test
  void saveLoadAndInfo() {
    String path = dir.resolve("a.dpckpt").toString();
    try (Workspace ws = Workspace.create()) {
      ws.feed("w", new float[] {1f, 2f, 3f, 4f, 5f, 6f}, 2, 3);
      ws.feed("n", new int[] {7}, 1);
      Checkpoint.save(ws, List.of("w", "n"), path, new CheckpointSaveOptions().modelName("m").iteration(12));
      try (CheckpointInfo info = CheckpointInfo.fromFile(path)) {
        assertEquals(Dp.version(), info.dpVersion());
        assertEquals("m", info.modelName());
        assertEquals(12, info.iteration());
        assertEquals(2, info.numTensors());
        assertEquals("w", info.tensorName(0));
        assertEquals(DType.FLOAT32, info.tensorDtype(0));
        assertEquals(2, info.tensorNdim(0));
        assertArrayEquals(new long[] {2, 3}, info.tensorDims(0));
        assertEquals(24, info.tensorNbytes(0));
        assertEquals(DType.INT32, info.tensorDtype(1));
        assertThrows(IndexOutOfBoundsException.class, () -> info.tensorName(2));
      }
      ws.feed("w", new float[6], 2, 3);
      Checkpoint.load(ws, path, null);
      assertArrayEquals(new float[] {1f, 2f, 3f, 4f, 5f, 6f}, ws.fetchFloats("w"));
      // Strict: a shape that does not match is refused and nothing changes.
      ws.feed("w", new float[4], 4);
      assertThrows(DpShapeException.class, () -> Checkpoint.load(ws, path, null));
      assertArrayEquals(new float[4], ws.fetchFloats("w"));
    }
    try (Workspace fresh = Workspace.create()) {
      assertThrows(DpNotFoundException.class, () -> Checkpoint.load(fresh, path, null));
      Checkpoint.load(fresh, path, new CheckpointLoadOptions().lenient(true).mmap(true).names("n"));
      assertEquals(List.of("n"), fresh.listBlobs());
      Checkpoint.load(fresh, path, new CheckpointLoadOptions().lenient(true).noVerify(true));
      assertArrayEquals(new float[] {1f, 2f, 3f, 4f, 5f, 6f}, fresh.fetchFloats("w"));
    }
  }

  @Test
  void asyncSaveListAndPrune() throws Exception {
    try (Workspace ws = Workspace.create()) {
      for (int step = 1; step <= 4; ++step) {
        ws.feed("p", new float[] {step, step}, 2);
        String path = dir.resolve(Checkpoint.stepFileName(step * 10)).toString();
        try (CheckpointJob job = Checkpoint.saveAsync(ws, null, path,
            new CheckpointSaveOptions().iteration(step * 10).asyncWriteShare(1.0))) {
          ws.feed("p", new float[] {-1f, -1f}, 2); // the snapshot is unaffected
          assertTrue(job.await(60_000));
          assertTrue(job.await(0)); // finished: the same result again
        }
      }
      List<String> steps = Checkpoint.listSteps(dir.toString());
      assertEquals(4, steps.size());
      assertTrue(steps.get(0).endsWith(Checkpoint.stepFileName(40)), steps.toString());
      Checkpoint.prune(dir.toString(), 2);
      steps = Checkpoint.listSteps(dir.toString());
      assertEquals(2, steps.size());
      Checkpoint.load(ws, steps.get(0), null);
      assertArrayEquals(new float[] {4f, 4f}, ws.fetchFloats("p"));
      try (CheckpointInfo info = CheckpointInfo.fromFile(steps.get(1))) {
        assertEquals(30, info.iteration());
      }
      assertThrows(DpInvalidArgumentException.class,
          () -> Checkpoint.save(ws, null, dir.resolve("x.dpckpt").toString(),
              new CheckpointSaveOptions().asyncWriteShare(2.0)));
      assertThrows(DpNotFoundException.class,
          () -> Checkpoint.saveAsync(ws, List.of("missing"), dir.resolve("y.dpckpt").toString(), null));
      assertFalse(Files.exists(dir.resolve("y.dpckpt")));
    }
  }

  @Test
  void modelTrainingStateRoundTrip() {
    String path = dir.resolve(Checkpoint.stepFileName(3)).toString();
    try (Model model = Model.fromJson(TestSupport.TINY_MODEL); TrainingNets defs = model.buildTraining(null);
         Workspace ws = Workspace.create(); Net init = Net.create(ws, defs.init);
         Net train = Net.create(ws, defs.train)) {
      init.run();
      for (int s = 0; s < 3; ++s) {
        ws.feed("data", TestSupport.tinyData(s), 8, 4);
        ws.feed("label", TestSupport.tinyLabels(s), 8);
        train.run();
      }
      List<String> blobs = model.checkpointBlobs();
      assertTrue(blobs.contains("optimizer/iter"), blobs.toString());
      Checkpoint.save(ws, blobs, path, null);
      try (CheckpointInfo info = CheckpointInfo.fromFile(path)) {
        assertEquals(3, info.iteration());
      }
      float[] w = ws.fetchFloats("w");
      // A fresh workspace with its init net run, then the checkpoint: the same state.
      try (Workspace ws2 = Workspace.create(); Net init2 = Net.create(ws2, defs.init)) {
        init2.run();
        Checkpoint.load(ws2, path, null);
        assertArrayEquals(w, ws2.fetchFloats("w"));
      }
    }
  }
}
