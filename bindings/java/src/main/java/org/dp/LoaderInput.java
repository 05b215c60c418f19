package org.dp;

/**
 * One input of a callback {@link Loader} (dp_loader_input, since 0.5): the blob it is fed to, its
 * element type and one sample's shape without the batch dimension (empty for a scalar per sample).
 */
public final class LoaderInput {
  public final String blob;
  public final DType dtype;
  public final long[] sampleDims;

  public LoaderInput(String blob, DType dtype, long... sampleDims) {
    this.blob = blob;
    this.dtype = dtype;
    this.sampleDims = sampleDims == null ? new long[0] : sampleDims.clone();
  }
}
