"""Qt-free run sessions: the engine session and its child process, the records the window and the worker
exchange, and the device choice.
"""
