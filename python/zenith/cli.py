"""The `zenith` console script. Subcommands: bench."""
import sys


def main():
    argv = sys.argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: zenith bench [...]   (see: zenith bench --help)")
        return 0
    if argv[0] == "bench":
        from zenith.bench.cli import main as bench_main

        return bench_main(argv[1:])
    print(f"zenith: unknown command {argv[0]!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
