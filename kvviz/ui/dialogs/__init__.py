"""The window's dialogs: the KV memory calculator, the keyboard shortcuts table, About."""
