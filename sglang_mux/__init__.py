"""sglang_mux: intra-GPU prefill-decode multiplexing (MuxWise) on SGLang 0.5.16."""

__version__ = "0.1.0"
SGLANG_VERSION = "0.5.16"
