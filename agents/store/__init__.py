"""What the engine persists, and where: the Store protocol, its records, an in-memory Store.

The Django app implements the protocol over its database (taskos/store); the in-memory
one serves engine tests, headless runs and the benchmark.
"""
from agents.store.interface import (AnchorRecord, ApprovalRecord, ArchiveHit, ChildRecord, Store,
                                    TaskRecord)
from agents.store.memory import MemoryStore
from agents.store.search import excerpt_around, keywords

__all__ = ["AnchorRecord", "ApprovalRecord", "ArchiveHit", "ChildRecord", "MemoryStore", "Store", "TaskRecord",
           "excerpt_around", "keywords"]
