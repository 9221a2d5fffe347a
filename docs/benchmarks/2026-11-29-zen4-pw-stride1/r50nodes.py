# Per-conv-class times of ResNet-50 on Zenith (zenith.profile, median of 9 calls), each class's GFLOP/s from
# the eager model's conv shapes: python r50nodes.py <batch>
import os, sys, torch, torchvision, zenith, collections
torch.manual_seed(0); torch.set_num_threads(2)
B=int(sys.argv[1]); m=torchvision.models.resnet50().eval(); x=torch.randn(B,3,224,224)
convs=[]
def hook(mod, inp, out):
    k=mod.kernel_size[0]*mod.kernel_size[1]
    convs.append((f"{mod.in_channels}->{mod.out_channels} k{mod.kernel_size[0]} s{mod.stride[0]} out{out.shape[2]}", 2*out.numel()*mod.in_channels*k))
hs=[mm.register_forward_hook(hook) for mm in m.modules() if isinstance(mm, torch.nn.Conv2d)]
with torch.no_grad(): m(x)
for h in hs: h.remove()
c=torch.compile(m, backend="zenith")
with torch.no_grad():
    for _ in range(3): c(x)
    with zenith.profile(trace=os.devnull) as p:
        for _ in range(9): c(x)
per=collections.defaultdict(list); first={}; info={}
for op,node,graph,tid,ts,dur,shape in p.events:
    per[node].append(dur); first[node]=min(first.get(node,ts),ts); info[node]=op
nodes=sorted(per, key=lambda n: first[n])
convnodes=[n for n in nodes if info[n].startswith("conv2d")]
assert len(convnodes)==len(convs), (len(convnodes), len(convs))
agg=collections.defaultdict(lambda:[0,0,0])
tot=0
for n,(desc,fl) in zip(convnodes,convs):
    med=sorted(per[n])[len(per[n])//2]/1e3; tot+=med
    a=agg[desc]; a[0]+=med; a[1]+=fl; a[2]+=1
for desc,(ms,fl,k) in sorted(agg.items(), key=lambda kv:-kv[1][0]):
    print(f"{desc:<28} n={k:<2} {ms:7.3f} ms  {fl/ms/1e6:6.1f} GF/s")
print("conv total", round(tot,3))
