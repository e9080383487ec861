"""Engine metrics: vLLM / TGI / SGLang / llama.cpp ``/metrics`` names, the scraper, cumulative
histograms and the windowed rates (KV-cache use, queue depth, TTFT/ITL quantiles) stored per sample.
"""
