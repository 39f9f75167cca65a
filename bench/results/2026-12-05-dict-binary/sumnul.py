import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1])]
for v in dict.fromkeys(r[1] for r in rows):
    r=[x for x in rows if x[1]==v]
    w=[float(x[2]) for x in r]; c=[float(x[3])+float(x[4]) for x in r]; s=[int(x[7]) for x in r]; m=[int(x[5]) for x in r]
    print(r[0][0], v, len(r), 'wall med %.3f [%.2f-%.2f]'%(st.median(w),min(w),max(w)), 'cpu med %.3f [%.2f-%.2f]'%(st.median(c),min(c),max(c)), 'repo med %d [%d-%d]'%(st.median(s),min(s),max(s)), 'rss med', st.median(m))
