// What the host harnesses share: reading a whole file.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <vector>

inline std::vector<char> slurp(const char* path) {
    std::vector<char> v;
    FILE* f = fopen(path, "rb");
    if (!f) exit(2);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + n);
    fclose(f);
    return v;
}
