"""Planning a step: which strategy trains which sequences (dispatch, auto), how they are packed
(batching), and what the cost model predicts and the profiles measure (time and memory)."""
