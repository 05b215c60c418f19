package org.dp;

import java.nio.ByteBuffer;

/**
 * Writes the samples of a batch for a callback {@link Loader} (dp_loader_fill_fn, since 0.5).
 *
 * <p>For input j, sample {@code indices[i]} goes to row i of {@code buffers[j]}: bytes
 * [i * n, (i + 1) * n) with n = {@code buffers[j].capacity() / indices.length}, one sample's size,
 * in the input's dtype. The buffers are direct, in {@link java.nio.ByteOrder#nativeOrder()}, and
 * over memory the loader owns: they are valid during the call only, so never keep them (or views
 * of them) afterwards.
 *
 * <p>It runs on the loader's own thread (attached to the JVM as a daemon thread), one call at a
 * time, while the caller's steps run. It must not close its loader. Returning anything but 0, or
 * throwing (as -1), fails the batch: {@link Loader#next} then throws a {@link DpInternalException}
 * naming the value, with what was thrown as its cause.
 */
@FunctionalInterface
public interface LoaderCallback {
  int fill(long[] indices, ByteBuffer[] buffers);
}
