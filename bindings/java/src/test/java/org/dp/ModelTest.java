package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Models: introspection, optimizer, serialisation, and data parallelism over CPU replicas. */
class ModelTest {
  @Test
  void introspectionAndRoundTrips() {
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL)) {
      assertEquals("tiny", m.name());
      assertEquals(List.of("w", "b"), m.blobs(Model.PARAMS));
      assertEquals(List.of(), m.blobs(Model.COMPUTED_PARAMS));
      assertEquals(List.of("data", "label"), m.blobs(Model.INPUTS));
      assertEquals(List.of("loss"), m.blobs(Model.LOSSES));
      assertEquals(List.of("accuracy"), m.blobs(Model.METRICS));
      assertTrue(m.hasOptimizer());
      OptimizerInfo o = m.optimizer();
      assertEquals("momentum", o.type);
      assertEquals(0.1, o.lr, 1e-12);
      assertEquals(0.9, o.momentum, 1e-12);
      assertEquals("fixed", o.lrPolicy);
      try (NetDef init = m.net(Model.INIT_NET); NetDef fwd = m.net(Model.FORWARD_NET)) {
        assertEquals("tiny_init", init.name());
        assertEquals("FC", fwd.op(0).type());
      }
      try (Model fromBuf = Model.fromBuffer(m.toBuffer()); Model fromJson = Model.fromJson(m.toJson())) {
        assertEquals("tiny", fromBuf.name());
        assertEquals(List.of("w", "b"), fromJson.blobs(Model.PARAMS));
      }
      try (TrainingNets t = m.buildTraining(new TrainingOptions().lr(0.05).lossScale(1.0))) {
        assertTrue(t.train.numOps() > t.eval.numOps());
      }
    }
    Path file = TestSupport.sourceRoot().resolve("samples/nets/fashion_mlp.json");
    try (Model m = Model.fromFile(file.toString())) {
      assertEquals("adam", m.optimizer().type);
      assertEquals(937, m.optimizer().stepsize);
    }
  }

  @Test
  void twoCpuReplicasTrainLikeOneDevice() {
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL); ParallelModel pm = m.parallelize(ParallelOptions.cpu(2));
         TrainingNets defs = pm.nets(); Workspace ws = Workspace.create(); Net init = Net.create(ws, defs.init);
         Net train = Net.create(ws, defs.train); Net eval = Net.create(ws, defs.eval)) {
      assertEquals(2, pm.numReplicas());
      assertEquals("cpu_0/", pm.scope(0));
      assertEquals("cpu_1/", pm.scope(1));
      assertNull(pm.scope(2));
      init.run();
      for (int s = 0; s < 10; ++s) {
        ws.feed("data", TestSupport.tinyData(s), 8, 4);
        ws.feed("label", TestSupport.tinyLabels(s), 8);
        train.run();
      }
      float[][] one = TestSupport.trainTiny(m, 10);
      assertArrayEquals(one[0], ws.fetchFloats("cpu_0/w"), 1e-5f);
      assertArrayEquals(ws.fetchFloats("cpu_0/w"), ws.fetchFloats("cpu_1/w"), 1e-6f);
      eval.run();
      try (NetDef sync = pm.syncNet()) {
        assertTrue(sync.numOps() > 0);
      }
      ws.feed("cpu_1/w", new float[12], 3, 4);
      pm.sync(ws);
      assertArrayEquals(ws.fetchFloats("cpu_0/w"), ws.fetchFloats("cpu_1/w"));
      assertThrows(DpFailedPreconditionException.class, pm::blockNet);
    }
  }

  @Test
  void accumulationBmufAndParallelCheckpoints() throws Exception {
    Path dir = TestSupport.tempDir("pm");
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL)) {
      try (ParallelModel acc = m.parallelize(ParallelOptions.cpu(2).accumulateSteps(2));
           NetDef a = acc.accumulateNet()) {
        assertTrue(a.numOps() > 0);
      }
      try (ParallelModel b = m.parallelize(ParallelOptions.cpu(2).bmuf(4)); BlockNet block = b.blockNet()) {
        assertEquals(4, block.blockLength);
        assertTrue(block.netDef.numOps() > 0);
      }
      String path = dir.resolve(Checkpoint.stepFileName(2)).toString();
      try (ParallelModel pm = m.parallelize(ParallelOptions.cpu(2)); TrainingNets defs = pm.nets();
           Workspace ws = Workspace.create(); Net init = Net.create(ws, defs.init);
           Net train = Net.create(ws, defs.train)) {
        init.run();
        for (int s = 0; s < 2; ++s) {
          ws.feed("data", TestSupport.tinyData(s), 8, 4);
          ws.feed("label", TestSupport.tinyLabels(s), 8);
          train.run();
        }
        pm.save(ws, path, null);
        float[] w = ws.fetchFloats("cpu_0/w");
        try (CheckpointInfo info = CheckpointInfo.fromFile(path)) {
          assertEquals("tiny", info.modelName());
          assertEquals(2, info.iteration());
        }
        // Into three replicas: the file does not depend on the device count.
        try (ParallelModel pm3 = m.parallelize(ParallelOptions.cpu(3)); TrainingNets d3 = pm3.nets();
             Workspace ws3 = Workspace.create(); Net init3 = Net.create(ws3, d3.init)) {
          init3.run();
          pm3.load(ws3, path, new CheckpointLoadOptions());
          assertArrayEquals(w, ws3.fetchFloats("cpu_2/w"), 1e-7f);
        }
      }
    } finally {
      TestSupport.deleteTree(dir);
    }
  }
}
