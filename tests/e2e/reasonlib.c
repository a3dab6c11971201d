/* reasonlib.c -- reasonpaths.c's library: two push-only frames that call back into the program. */
long lib_one(long n, long (*f)(long));
long lib_two(long n, long (*f)(long));

__attribute__((noinline)) long lib_one(long n, long (*f)(long))
{
    long k = n * 3;
    long r = f(n);
    return r + k;
}

__attribute__((noinline)) long lib_two(long n, long (*f)(long))
{
    long k = n * 5;
    long r = f(n);
    return r ^ k;
}
