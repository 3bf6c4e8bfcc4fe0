"""What the VM-protocol backends (``osworld``, ``x11``, ``waa``, ``macosworld``) share.

``client`` (VMServerClient: OSWorld's in-VM server protocol, and VMServerBackend), ``codec``
(its screenshot and accessibility-tree decoding), ``setup_runner`` (running planned set-up steps
on a VM), ``revert`` (host commands that bring a VM back), ``mirror`` (local copies of the files
tasks download), ``task_sources`` (reading ``backend_kwargs.tasks`` and choosing a split).
"""
