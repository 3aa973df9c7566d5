// placeholder: filled in by the module's implementation
