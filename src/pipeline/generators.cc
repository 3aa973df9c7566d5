// Named pipeline schedule generators (see generators.h).
