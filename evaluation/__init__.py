"""The evaluation harness: policies played over fixed seeds (:mod:`.episodes`, in processes or on Ray:
:mod:`.ray_backend`), their statistics (:mod:`.stats`, :mod:`.summary`), tables and files (:mod:`.report`), figures
(:mod:`.plots`) and the ``geopipe-evaluate`` command (:mod:`.evaluate_cli`, with the argument helpers of both commands
in :mod:`.cli`). It plays any policy of the protocol in ``geopipe_baselines``, found by name (:mod:`.specs`)."""
