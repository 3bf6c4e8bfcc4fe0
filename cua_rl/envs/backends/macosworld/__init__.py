"""macOSWorld: real Macs over VNC (screen, input) and SSH (set-up, checks).

Module map: ``tasks`` (MacOSWorldTask, MacOSWorldTasks), ``settings``, ``vnc`` / ``vnc_keys``
(the RFB client and the key maps), ``ssh`` (the SSH client), ``backend`` (MacOSWorldBackend),
``spec`` (the registry entry ``MACOSWORLD``).
"""
