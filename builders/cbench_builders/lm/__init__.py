"""A small language model trained here by next-token prediction on a generated corpus: the offline
stand-in for a real LLM (no ground truth). ``corpus`` (text, tokenizer, held-out prompts), ``train``."""
