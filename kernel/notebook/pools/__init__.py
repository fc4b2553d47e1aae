"""Warm pools (``%train_pool``): ranks that outlive cells, their launcher, magics and results."""
