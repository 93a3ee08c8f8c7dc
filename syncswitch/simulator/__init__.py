"""A deterministic protocol simulator in one process (after FRED, the FASGD paper's simulator).

The user's model_fn/input_fn are built once; N simulated workers, each with its own data shard and the
parameters it last read, compute their gradients in turn, in the order an arrival model says they finish;
each catalog protocol is a server rule (`apply_update(grads, timestamp, client)`) on the shared flat parameter
vector. The run folder it writes is a real run's (summary.json, evaluations, metrics.jsonl).
"""
