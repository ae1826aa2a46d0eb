"""Inference graphs: the JSON-plus-safetensors format, its validating loader, the executor and the
static memory planner. Reading and running a graph never imports torch."""
from .format import FORMAT_TAG, FORMAT_VERSION, GraphError
from .graph import Graph, load
from .planner import Block, MemoryPlan, overlapping_pairs, place, plan

__all__ = ["FORMAT_TAG", "FORMAT_VERSION", "Block", "Graph", "GraphError", "MemoryPlan", "load",
           "overlapping_pairs", "place", "plan"]
