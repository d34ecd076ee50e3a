"""The comparison methods of the paper, one module (or package) each: the policies' floor.

Each is a :class:`~gittinseval.core.protocol.Policy` named by one ``conf/policy/*.yaml``
(``_target_: gittinseval.baselines.<module>.<Class>``).  The floor imports
``gittinseval.utils``, ``gittinseval.data`` and ``gittinseval.core`` only.

Until issue 51 this was the top-level package ``baselines``; config digests and live
store identities still name its classes so (:func:`~gittinseval.core.params.legacy_target`).
"""
