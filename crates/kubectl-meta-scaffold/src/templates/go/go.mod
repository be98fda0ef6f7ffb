module {{PROJECT}}/hook

go 1.22
