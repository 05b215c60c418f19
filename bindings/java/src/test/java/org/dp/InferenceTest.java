package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Inference nets (Model.buildInference): the eval net's softmax without labels, in workspaces that
 * share the trained param tensors; served from threads, each with its own workspace and net.
 */
class InferenceTest {
  /** Trains the tiny model 10 steps, then runs its eval net on batch 50 (left in the workspace). */
  private static void train(Model m, Workspace ws) {
    try (TrainingNets defs = m.buildTraining(null); Net init = Net.create(ws, defs.init);
         Net train = Net.create(ws, defs.train); Net eval = Net.create(ws, defs.eval)) {
      init.run();
      for (int s = 0; s < 10; ++s) {
        ws.feed("data", TestSupport.tinyData(s), 8, 4);
        ws.feed("label", TestSupport.tinyLabels(s), 8);
        train.run();
      }
      ws.feed("data", TestSupport.tinyData(50), 8, 4);
      ws.feed("label", TestSupport.tinyLabels(50), 8);
      eval.run();
    }
  }

  /** Feeds the net's params from the trained workspace into ws (shared tensors, not copies). */
  private static void shareParams(NetDef def, Workspace trained, Workspace ws) {
    for (String name : def.externalInputs()) {
      if (name.equals("data")) continue;
      try (Tensor t = trained.fetch(name)) {
        ws.feed(name, t);
      }
    }
  }

  @Test
  void softmaxWithoutLabelsEqualsTheEvalNet() {
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL); Workspace trained = Workspace.create();
         Workspace ws = Workspace.create()) {
      train(m, trained);
      try (NetDef def = m.buildInference(List.of("softmax"), null)) {
        assertEquals(List.of("softmax"), def.externalOutputs());
        assertEquals(List.of("w", "b", "data"), def.externalInputs());
        shareParams(def, trained, ws);
        ws.feed("data", TestSupport.tinyData(50), 8, 4);
        try (Net net = Net.create(ws, def)) {
          net.run();
        }
        assertArrayEquals(trained.fetchFloats("softmax"), ws.fetchFloats("softmax"));
        assertFalse(ws.hasBlob("label"));
      }
      try (NetDef dflt = m.buildInference(null, new InferenceOptions().noFuse(true))) {
        assertEquals(List.of("logits", "softmax"), dflt.externalOutputs());
      }
      DpNotFoundException e =
          assertThrows(DpNotFoundException.class, () -> m.buildInference(List.of("sofmax"), null));
      assertTrue(e.getMessage().contains("did you mean 'softmax'?"), e.getMessage());
      assertThrows(DpInvalidArgumentException.class, () -> m.buildInference(List.of("logits", "logits"), null));
    }
  }

  @Test
  void servedFromThreadsEachWithItsOwnWorkspace() throws Exception {
    final int workers = 4;
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL); Workspace trained = Workspace.create();
         NetDef def = m.buildInference(List.of("softmax"), null)) {
      train(m, trained);
      // The serial result of each worker's batch.
      float[][] want = new float[workers][];
      try (Workspace ws = Workspace.create()) {
        shareParams(def, trained, ws);
        try (Net net = Net.create(ws, def)) {
          for (int w = 0; w < workers; ++w) {
            ws.feed("data", TestSupport.tinyData(100 + w), 8, 4);
            net.run();
            want[w] = ws.fetchFloats("softmax");
          }
        }
      }
      assertFalse(java.util.Arrays.equals(want[0], want[1]));
      ExecutorService pool = Executors.newFixedThreadPool(workers);
      try {
        List<Future<?>> done = new ArrayList<>();
        for (int w = 0; w < workers; ++w) {
          final int id = w;
          done.add(pool.submit(() -> {
            try (Workspace ws = Workspace.create()) {
              shareParams(def, trained, ws);
              try (Net net = Net.create(ws, def)) {
                for (int r = 0; r < 20; ++r) {
                  ws.feed("data", TestSupport.tinyData(100 + id), 8, 4);
                  net.run();
                  assertArrayEquals(want[id], ws.fetchFloats("softmax"), "worker " + id + " run " + r);
                }
              }
            }
            return null;
          }));
        }
        for (Future<?> f : done) f.get(60, TimeUnit.SECONDS);
      } finally {
        pool.shutdownNow();
      }
    }
  }
}
