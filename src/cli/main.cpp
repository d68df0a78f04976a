#include <cstdio>
int main() { std::puts("golinear"); return 0; }
