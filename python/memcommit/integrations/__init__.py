"""Integrations of memcommit with agent frameworks.

Each integration is a subpackage that imports its framework, so it is installed with an extra
and importing :mod:`memcommit` itself never needs the framework:

* :mod:`memcommit.integrations.langgraph` (``pip install memcommit[langgraph]``): a LangGraph
  checkpointer (:class:`~memcommit.integrations.langgraph.MemcommitSaver`) and long-term store
  (:class:`~memcommit.integrations.langgraph.MemcommitStore`) over a memcommit store's log.
"""
