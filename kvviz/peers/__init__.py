"""Real engines beside kvviz: kvviz models written as Hugging Face checkpoints (hf_export), a vLLM run of a
serving workload in a child process (vllm), and the request-by-request comparison with kvviz's own
schedulers (compare). Nothing here imports Qt or vLLM itself; vLLM runs only in the child.
"""
