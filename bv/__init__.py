"""bv: evaluate multimodal LLMs on BabyVision-style visual questions, as composable Unix stages."""

__version__ = "0.1.0"
