"""Diagrams of the machine and of the paths runs took: a data model
(:mod:`agentfsm.diagram.model`), built from the machine or from transcripts
(:mod:`agentfsm.diagram.build`), and its text renderings (:mod:`agentfsm.diagram.text`).
The transcripts are read as ``replay`` and ``report`` read them too: the files named
(:func:`~agentfsm.diagram.build.transcript_files`), each run's events checked for order
(:mod:`agentfsm.diagram.order`)."""

__all__: list[str] = []
