"""Diagrams of the machine and of the paths runs took: a data model
(:mod:`agentfsm.diagram.model`), built from the machine or from transcripts
(:mod:`agentfsm.diagram.build`), and its text renderings (:mod:`agentfsm.diagram.text`)."""

__all__: list[str] = []
