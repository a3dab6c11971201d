// inline_subject.cpp -- a C++ method inlined into a function, for test_module's inlined-frame names.
namespace ns {
struct Acc {
    unsigned v;
    __attribute__((always_inline)) inline unsigned add(unsigned x)
    {
        for (unsigned i = 0; i < x; i++)
            v += i * x;
        return v;
    }
};
} // namespace ns

__attribute__((noipa)) unsigned icpp_test_cxx_user(unsigned x)
{
    ns::Acc a{x};
    return a.add(x * 3) + 1;
}

int main(int argc, char **)
{
    return (int)icpp_test_cxx_user((unsigned)argc) & 1;
}
