package org.dp;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/** The result of {@link NetDef#addGradients}: the new definition and each wrt blob's gradient blob. */
public final class Gradients implements AutoCloseable {
  /** The forward ops followed by the gradient ops; owned by this object. */
  public final NetDef netDef;
  /** wrt blob -> its gradient blob ("X" -> "X_grad"), in dp's order. */
  public final Map<String, String> gradientOf;

  Gradients(NetDef netDef, String[] pairs) {
    this.netDef = netDef;
    Map<String, String> m = new LinkedHashMap<>();
    for (int i = 0; i + 1 < pairs.length; i += 2) m.put(pairs[i], pairs[i + 1]);
    this.gradientOf = Collections.unmodifiableMap(m);
  }

  @Override
  public void close() {
    netDef.close();
  }
}
