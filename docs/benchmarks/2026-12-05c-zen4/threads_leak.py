import threading, torch, zenith, os, resource
torch.manual_seed(0); torch.set_num_threads(2)
import torchvision; m = torchvision.models.mobilenet_v2().eval()
x = torch.randn(2, 3, 96, 96)
f = zenith.freeze(m)
def status():
    d = dict(l.split(":\t") for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
    return int(d["Threads"]), d["VmRSS"].strip()
with torch.no_grad():
    ref = f(x)
    print("start", status())
    for round_ in range(5):
        for _ in range(20):
            t = threading.Thread(target=lambda: f(x)); t.start(); t.join()
        print("after", (round_ + 1) * 20, "short-lived threads", status())
