"""Serving engines, one module each, budgeting GPU memory the way the engine does at start-up:
``vllm.py`` (vLLM's profile run and KV-cache budget, release by release). An engine reads the
``Serving`` its config becomes (``serving_plan.py``)."""
